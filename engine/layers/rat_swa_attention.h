// RatSwaAttention: the sliding-window attention layer of the interleaved
// RAT–SWA model (upstream `local_attention`; fact sheet §2.2-2.3), the odd
// layers when interleave_step = 2.
//
//   [v | q | k] = x̂ · W_in^T          W_in [3D, D] (value first)
//   q, k <- RoPE rotate-half by the TOKEN position (dim hd, base b)
//   o_t[h] = softmax_j(q_t[h] · k_j[h] · hd^-1/2) v_j[h], t - W <= j <= t
//   out = o · W_out^T                  W_out [D, D]
// (W = window: W previous keys plus the token itself.) The model adds the
// layer's input back (its own residual upstream).
//
// Tensors under <prefix>: seq_layer.in_proj.weight, seq_layer.out_proj.weight.
// State: WindowKvState (ring of W post-rotary keys and values).
#ifndef TWICE_ENGINE_LAYERS_RAT_SWA_ATTENTION_H_
#define TWICE_ENGINE_LAYERS_RAT_SWA_ATTENTION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/layers/mixer.h"
#include "engine/layers/window_kv_state.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

struct RatSwaOptions {
  int64_t dim = 0;
  int64_t heads = 0;
  int64_t window = 0;
  float rope_base = 10000.0f;
};

class RatSwaAttention final : public Mixer {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RatSwaAttention>> Load(
      const WeightMap& weights, const std::string& prefix,
      const RatSwaOptions& options);

  std::unique_ptr<LayerState> NewState() const override;
  [[nodiscard]] absl::Status ValidateState(LayerState& state,
                                           int64_t start_pos) const override;
  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     int64_t start_pos, LayerState& state,
                                     absl::Span<float> out) const override;

  // For a device copy of the layer (engine/executor/).
  const RatSwaOptions& options() const { return options_; }
  int64_t head_dim() const { return head_dim_; }
  const Tensor& in_proj() const { return in_proj_; }
  const Tensor& out_proj() const { return out_proj_; }

 private:
  [[nodiscard]] absl::StatusOr<WindowKvState*> CheckState(
      LayerState& state, int64_t start_pos) const;
  RatSwaAttention() = default;

  RatSwaOptions options_;
  int64_t head_dim_ = 0;
  Tensor in_proj_, out_proj_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_RAT_SWA_ATTENTION_H_
