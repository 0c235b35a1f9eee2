// Relu2Mlp: Nemotron-H's MLP layer, non-gated with a squared ReLU (no
// biases).
//
//   out = down( relu(x · up^T)² )      up_proj [I, d]; down_proj [d, I]
// Tensors under <module> (backbone.layers.{i}.mixer.): up_proj.weight,
// down_proj.weight.
#ifndef TWICE_ENGINE_LAYERS_RELU2_MLP_H_
#define TWICE_ENGINE_LAYERS_RELU2_MLP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/layers/feed_forward.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

class Relu2Mlp final : public FeedForward {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Relu2Mlp>> Load(
      const WeightMap& weights, const std::string& module, int64_t dim,
      int64_t hidden);

  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     absl::Span<float> out) const override;

  const Tensor& up() const { return up_; }
  const Tensor& down() const { return down_; }
  int64_t hidden() const { return hidden_; }

 private:
  Tensor up_, down_;
  int64_t dim_ = 0;
  int64_t hidden_ = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_RELU2_MLP_H_
