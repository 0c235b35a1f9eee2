// FusedSwiGluMlp: a SwiGLU MLP whose gate and up projections are stored as
// one matrix, gate rows first (Granite-4.0-H's shared_mlp; no biases).
//
//   u = x · input_linear^T          input_linear [2I, d] -> u [T, 2I]
//   g = u[:, :I], a = u[:, I:]      (the FIRST half is the gate, unlike
//                                   Based's GatedMlp)
//   out = (silu(g) · a) · output_linear^T     output_linear [d, I]
// Tensors under <module> (model.layers.{i}.shared_mlp.): input_linear.weight,
// output_linear.weight.
#ifndef TWICE_ENGINE_LAYERS_FUSED_SWIGLU_MLP_H_
#define TWICE_ENGINE_LAYERS_FUSED_SWIGLU_MLP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/layers/feed_forward.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

class FusedSwiGluMlp final : public FeedForward {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FusedSwiGluMlp>> Load(
      const WeightMap& weights, const std::string& module, int64_t dim,
      int64_t hidden);

  // From matrices already loaded: input [2·hidden, dim], output [dim,
  // hidden] (a mixture-of-experts layer's experts, sliced from one stored
  // tensor). INVALID_ARGUMENT when the shapes differ.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FusedSwiGluMlp>>
  FromMatrices(Tensor input, Tensor output, int64_t dim, int64_t hidden);

  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     absl::Span<float> out) const override;

  const Tensor& input() const { return input_; }    // [2I, d]
  const Tensor& output() const { return output_; }  // [d, I]
  int64_t dim() const { return dim_; }
  int64_t hidden() const { return hidden_; }

 private:
  Tensor input_, output_;
  int64_t dim_ = 0;
  int64_t hidden_ = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_FUSED_SWIGLU_MLP_H_
