// RmsNormLayer: y = x · w / sqrt(mean(x^2) + eps) per row, weight [d], no
// bias (Based norm1 / norm2 / ln_f).
#ifndef TWICE_ENGINE_LAYERS_RMS_NORM_H_
#define TWICE_ENGINE_LAYERS_RMS_NORM_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

class RmsNormLayer {
 public:
  // Reads `name` ([dim]).
  [[nodiscard]] static absl::StatusOr<RmsNormLayer> Load(
      const WeightMap& weights, const std::string& name, int64_t dim,
      float eps);

  // x, y: [rows, dim]; y may alias x.
  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t rows,
                                     absl::Span<float> y) const;

  const Tensor& weight() const { return weight_; }  // [dim] f32
  float eps() const { return eps_; }

 private:
  Tensor weight_;
  int64_t dim_ = 0;
  float eps_ = 0.0f;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_RMS_NORM_H_
