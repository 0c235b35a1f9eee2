// SlidingWindowAttention: causal softmax attention over the last L = W/2
// tokens plus the current one, with rotary embeddings (Based alt_mixer_2).
//
//   qkv = x · Wqkv^T -> [T, 3d]     Wqkv [3d, d]: rows [0,d) q, [d,2d) k,
//                                   [2d,3d) v; head h at columns h·hd..
//   q, k <- RoPE rotate-half, base b, at absolute positions p = start_pos + i
//   y_i = softmax_j(q_i · k_j · hd^-1/2) v_j over j in [max(0, p_i - L), p_i]
//   out = y · Wo^T                  Wo [d, d]
// H = n_head, hd = d / H, no biases. The state keeps post-rotary keys, so a
// cached key is never rotated again.
//
// Tensors under <prefix>: mixer.Wqkv.weight, mixer.out_proj.weight.
// State: WindowKvState (ring of L keys / values).
#ifndef TWICE_ENGINE_LAYERS_SLIDING_WINDOW_ATTENTION_H_
#define TWICE_ENGINE_LAYERS_SLIDING_WINDOW_ATTENTION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/layers/mixer.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

class WindowKvState;

struct SlidingWindowOptions {
  int64_t dim = 0;     // d
  int64_t heads = 0;   // H; d / H must be even
  int64_t window = 0;  // L, previous tokens a query sees (window_size / 2)
  float rotary_base = 10000.0f;
};

class SlidingWindowAttention final : public Mixer {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SlidingWindowAttention>>
  Load(const WeightMap& weights, const std::string& prefix,
       const SlidingWindowOptions& options);

  std::unique_ptr<LayerState> NewState() const override;
  [[nodiscard]] absl::Status ValidateState(LayerState& state,
                                           int64_t start_pos) const override;
  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     int64_t start_pos, LayerState& state,
                                     absl::Span<float> out) const override;
  // One GEMM per projection for the whole batch; rotary, attention over the
  // window and the ring update per sequence, at its own position.
  [[nodiscard]] absl::Status StepBatch(absl::Span<const float> x,
                                       absl::Span<LayerState* const> states,
                                       absl::Span<const int64_t> positions,
                                       absl::Span<float> out) const override;

  // The loaded parameters, for an executor that keeps its own copy on a
  // device (engine/executor/resident_executor.h).
  const SlidingWindowOptions& options() const { return options_; }
  int64_t head_dim() const { return head_dim_; }
  const Tensor& wqkv() const { return wqkv_; }  // [3d, d]
  const Tensor& wo() const { return wo_; }      // [d, d]

 private:
  SlidingWindowAttention() = default;

  // The matching ring that has read exactly `start_pos` tokens.
  [[nodiscard]] absl::StatusOr<WindowKvState*> CheckState(
      LayerState& state, int64_t start_pos) const;
  // Everything between the projections for `tokens` rows of one sequence:
  // qkv [T, 3d] (rotated in place), y [T, d]; advances `ring`.
  [[nodiscard]] absl::Status Attend(absl::Span<float> qkv, int64_t tokens,
                                    int64_t start_pos, WindowKvState& ring,
                                    absl::Span<float> y) const;

  SlidingWindowOptions options_;
  int64_t head_dim_ = 0;
  Tensor wqkv_, wo_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_SLIDING_WINDOW_ATTENTION_H_
