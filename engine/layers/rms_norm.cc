#include "engine/layers/rms_norm.h"

#include "kernels/rms_norm.h"
#include "kernels/status_macros.h"

namespace twice::engine {

absl::StatusOr<RmsNormLayer> RmsNormLayer::Load(const WeightMap& weights,
                                                const std::string& name,
                                                int64_t dim, float eps) {
  RmsNormLayer layer;
  TWICE_ASSIGN_OR_RETURN(layer.weight_, weights.Get(name, {dim}));
  layer.dim_ = dim;
  layer.eps_ = eps;
  return layer;
}

absl::Status RmsNormLayer::Forward(absl::Span<const float> x, int64_t rows,
                                   absl::Span<float> y) const {
  return kernels::RmsNorm(x, rows, dim_, weight_.span(), eps_, y);
}

}  // namespace twice::engine
