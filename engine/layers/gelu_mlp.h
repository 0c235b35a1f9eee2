// GeluMlp: the RAT FFN ("hidden_layer"), no biases.
//
//   out = fc2( GELU(x · fc1^T) ),  GELU(u) = u · Φ(u) = u/2 · (1 + erf(u/√2))
//   fc1 [F, d], fc2 [d, F]   (exact erf GELU, torch nn.GELU() default)
// Tensors: <prefix>fc1.weight, <prefix>fc2.weight (prefix ends in
// "hidden_layer.").
#ifndef TWICE_ENGINE_LAYERS_GELU_MLP_H_
#define TWICE_ENGINE_LAYERS_GELU_MLP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/layers/feed_forward.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

class GeluMlp final : public FeedForward {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<GeluMlp>> Load(
      const WeightMap& weights, const std::string& prefix, int64_t dim,
      int64_t hidden);

  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     absl::Span<float> out) const override;

  const Tensor& fc1() const { return fc1_; }
  const Tensor& fc2() const { return fc2_; }
  int64_t hidden() const { return hidden_; }

 private:
  Tensor fc1_, fc2_;
  int64_t dim_ = 0;
  int64_t hidden_ = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_GELU_MLP_H_
