// The element-wise steps around the Mamba-2 SSD scan (engine/layers/
// mamba2_mixer.h), shared by the layer and the resident executor so both
// compute them one way; their CUDA twins are in kernels/cuda/cuda_ops.h.
//
//   BiasSiluRows:       x[r, i] = SiLU(x[r, i] + bias[i])       (after the
//                       depthwise conv), x [rows, bias.size()] in place
//   SoftplusBiasRows:   out[r, i] = softplus(raw[r * stride + i] + bias[i]),
//                       out [rows, H]; softplus(v) = v for v > 20, as
//                       upstream's kernels (no overflow in exp)
//   GatedGroupRmsNorm:  v = y ⊙ SiLU(z); per group of width / groups
//                       channels v_g /= sqrt(mean(v_g²) + eps) (statistics
//                       in double); out = v ⊙ weight. z rows are z_stride
//                       apart (the z block of in_proj's output); y, out
//                       [rows, width]. out may alias y.
// Sizes are checked (INVALID_ARGUMENT naming the op and the argument).
#ifndef TWICE_KERNELS_SSM_GATING_H_
#define TWICE_KERNELS_SSM_GATING_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::kernels {

inline constexpr float kSoftplusThreshold = 20.0f;

[[nodiscard]] absl::Status BiasSiluRows(absl::Span<float> x, int64_t rows,
                                        absl::Span<const float> bias);

[[nodiscard]] absl::Status SoftplusBiasRows(absl::Span<const float> raw,
                                            int64_t rows, int64_t stride,
                                            absl::Span<const float> bias,
                                            absl::Span<float> out);

[[nodiscard]] absl::Status GatedGroupRmsNorm(
    absl::Span<const float> z, int64_t z_stride, absl::Span<const float> y,
    int64_t rows, int64_t width, int64_t groups, absl::Span<const float> weight,
    double eps, absl::Span<float> out);

// The argument checks of the three, on sizes, shared with their CUDA twins
// so both refuse the same calls with the same messages.
[[nodiscard]] absl::Status CheckBiasSiluRows(int64_t x_size, int64_t rows,
                                             int64_t bias_size);
[[nodiscard]] absl::Status CheckSoftplusBiasRows(int64_t raw_size, int64_t rows,
                                                 int64_t stride,
                                                 int64_t bias_size,
                                                 int64_t out_size);
[[nodiscard]] absl::Status CheckGatedGroupRmsNorm(int64_t z_size,
                                                  int64_t z_stride,
                                                  int64_t y_size, int64_t rows,
                                                  int64_t width, int64_t groups,
                                                  int64_t weight_size,
                                                  double eps, int64_t out_size);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_SSM_GATING_H_
