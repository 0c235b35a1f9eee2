// TaylorFeatureMap: the Based second-order Taylor feature map.
//
// For each input vector x of width F (feature_dim):
//   phi(x) = [ 1,  x / F^(1/4),  vec(x x^T) / (sqrt(2) · sqrt(F)) ]
// of width D = 1 + F + F^2 (TaylorFeatureDim). The quadratic block is the
// full row-major outer product: element 1 + F + m·F + n holds x_m x_n.
// Hence phi(q) · phi(k) = 1 + s + s^2 / 2 with s = q · k / sqrt(F).
//
// Layouts (row-major, contiguous): x [rows, F], out [rows, D].
#ifndef TWICE_KERNELS_TAYLOR_FEATURE_MAP_H_
#define TWICE_KERNELS_TAYLOR_FEATURE_MAP_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::kernels {

constexpr int64_t TaylorFeatureDim(int64_t feature_dim) {
  return 1 + feature_dim + feature_dim * feature_dim;
}

[[nodiscard]] absl::Status TaylorFeatureMap(absl::Span<const float> x,
                                            int64_t rows, int64_t feature_dim,
                                            absl::Span<float> out);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_TAYLOR_FEATURE_MAP_H_
