// RmsNorm: y[i, :] = x[i, :] · rstd_i · w,  rstd_i = 1 / sqrt(mean_j x[i, j]^2
// + eps).
//
// No mean subtraction and no bias (Based / Llama RMSNorm). Layouts
// (row-major, contiguous): x [rows, dim], w [dim], y [rows, dim]. y may alias
// x. Statistics are accumulated in double.
#ifndef TWICE_KERNELS_RMS_NORM_H_
#define TWICE_KERNELS_RMS_NORM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::kernels {

[[nodiscard]] absl::Status RmsNorm(absl::Span<const float> x, int64_t rows,
                                   int64_t dim, absl::Span<const float> weight,
                                   float eps, absl::Span<float> y);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_RMS_NORM_H_
