// BasedLinearAttention: causal linear attention with the Taylor feature map.
//
//   q = x · Wq^T -> [T, H, F]     Wq [H·F, d]   (no bias, no rotary)
//   k = x · Wk^T -> [T, H, F]     Wk [H·F, d]
//   v = x · Wv^T -> [T, H, hd]    Wv [d, d], hd = d / H
//   phi(x) = [1, x / F^(1/4), vec(x x^T) / (sqrt 2 · sqrt F)]   D = 1 + F + F^2
//   per head, over all tokens so far (state S [H, hd, D], z [H, D]):
//     y_t = (S_t phi(q_t)) / (z_t · phi(q_t) + eps),  S_t, z_t include token t
//   out = y · Wo^T                Wo [d, d]
// eps = 1e-12. Several tokens use the chunked prefill kernel, one token the
// recurrent step kernel; both compute the same function.
//
// Tensors under <prefix>: mixer.proj_q.weight, mixer.proj_k.weight,
// mixer.proj_v.weight, mixer.out_proj.weight. State: LinearAttentionState.
#ifndef TWICE_ENGINE_LAYERS_BASED_LINEAR_ATTENTION_H_
#define TWICE_ENGINE_LAYERS_BASED_LINEAR_ATTENTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/layers/mixer.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"
#include "kernels/taylor_linear_attention.h"

namespace twice::engine {

struct LinearAttentionOptions {
  int64_t dim = 0;           // d
  int64_t heads = 0;         // H, divides d
  int64_t feature_dim = 16;  // F
  float eps = 1e-12f;
};

class LinearAttentionState;

// The projections of a causal read (Based, and the decoder side of JRT's
// prefix linear attention). Not owned.
struct LinearAttentionWeights {
  const Tensor* wq = nullptr;  // [H·F, d]
  const Tensor* wk = nullptr;  // [H·F, d]
  const Tensor* wv = nullptr;  // [d, d]
  const Tensor* wo = nullptr;  // [d, d]
};

// One token for each of B = states.size() sequences (x, out [B, d]): q, k, v
// and the output projection run as one GEMM each with m = B; the recurrent
// step runs per sequence on its own (already checked) state.
[[nodiscard]] absl::Status LinearAttentionStepBatch(
    absl::Span<const float> x, const LinearAttentionOptions& options,
    const LinearAttentionWeights& weights,
    absl::Span<LinearAttentionState* const> states, absl::Span<float> out);

// What Based's mixer and JRT-RNN's prefix mixer share: the heads' sizes,
// the decoder projections and the state both keep.
struct LinearAttentionCore {
  // Validates `options` and loads <prefix>mixer.{proj_q, proj_k, proj_v,
  // out_proj}.weight; `mixer` names the caller in errors.
  [[nodiscard]] static absl::StatusOr<LinearAttentionCore> Load(
      const WeightMap& weights, const std::string& prefix,
      const LinearAttentionOptions& options, std::string_view mixer);
  std::unique_ptr<LayerState> NewState() const;
  // `state` as the LinearAttentionState of these sizes, FAILED_PRECONDITION
  // for any other.
  [[nodiscard]] absl::StatusOr<LinearAttentionState*> Check(
      LayerState& state) const;
  // The heads' shape as kernels::TaylorLinearAttention takes it.
  kernels::TaylorAttentionDims attention_dims() const {
    return {options.heads, head_dim, options.feature_dim};
  }

  std::string mixer;
  LinearAttentionOptions options;
  int64_t head_dim = 0;
  int64_t feature_size = 0;
  Tensor wq, wk, wv, wo;
};

class BasedLinearAttention final : public Mixer {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<BasedLinearAttention>>
  Load(const WeightMap& weights, const std::string& prefix,
       const LinearAttentionOptions& options);

  std::unique_ptr<LayerState> NewState() const override;
  [[nodiscard]] absl::Status ValidateState(LayerState& state,
                                           int64_t start_pos) const override;
  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     int64_t start_pos, LayerState& state,
                                     absl::Span<float> out) const override;
  [[nodiscard]] absl::Status StepBatch(absl::Span<const float> x,
                                       absl::Span<LayerState* const> states,
                                       absl::Span<const int64_t> positions,
                                       absl::Span<float> out) const override;

  // The loaded parameters (weights, sizes), for an executor that keeps its
  // own copy on a device (engine/executor/resident_executor.h).
  const LinearAttentionCore& core() const { return core_; }

 private:
  BasedLinearAttention() = default;

  LinearAttentionCore core_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_BASED_LINEAR_ATTENTION_H_
