// LlamaMlp: the HF LlamaMLP (SwiGLU, no biases).
//
//   out = down( silu(x · gate^T) ⊙ (x · up^T) )
//   gate_proj, up_proj [I, d]; down_proj [d, I]
// Tensors: <prefix>mlp.gate_proj.weight, mlp.up_proj.weight,
// mlp.down_proj.weight.
#ifndef TWICE_ENGINE_LAYERS_LLAMA_MLP_H_
#define TWICE_ENGINE_LAYERS_LLAMA_MLP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/layers/feed_forward.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

class LlamaMlp final : public FeedForward {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LlamaMlp>> Load(
      const WeightMap& weights, const std::string& prefix, int64_t dim,
      int64_t hidden);

  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     absl::Span<float> out) const override;

  const Tensor& gate() const { return gate_; }
  const Tensor& up() const { return up_; }
  const Tensor& down() const { return down_; }
  int64_t hidden() const { return hidden_; }

 private:
  Tensor gate_, up_, down_;
  int64_t dim_ = 0;
  int64_t hidden_ = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_LLAMA_MLP_H_
