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

#include "absl/status/statusor.h"
#include "engine/layers/mixer.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

struct LinearAttentionOptions {
  int64_t dim = 0;           // d
  int64_t heads = 0;         // H, divides d
  int64_t feature_dim = 16;  // F
  float eps = 1e-12f;
};

class BasedLinearAttention final : public Mixer {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<BasedLinearAttention>>
  Load(const WeightMap& weights, const std::string& prefix,
       const LinearAttentionOptions& options);

  std::unique_ptr<LayerState> NewState() const override;
  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     int64_t start_pos, LayerState& state,
                                     absl::Span<float> out) const override;

 private:
  BasedLinearAttention() = default;

  LinearAttentionOptions options_;
  int64_t head_dim_ = 0;
  int64_t feature_size_ = 0;
  Tensor wq_, wk_, wv_, wo_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_BASED_LINEAR_ATTENTION_H_
