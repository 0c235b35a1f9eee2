#include "kernels/ssm_gating.h"

#include <cmath>

#include "kernels/activations.h"
#include "kernels/check.h"
#include "kernels/status_macros.h"

namespace twice::kernels {

absl::Status CheckBiasSiluRows(int64_t x_size, int64_t rows,
                               int64_t bias_size) {
  constexpr char kOp[] = "BiasSiluRows";
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows >= 0 && bias_size >= 1, kOp, "need rows >= 0 and a bias"));
  return CheckSize(kOp, "x", x_size, rows * bias_size);
}

absl::Status CheckSoftplusBiasRows(int64_t raw_size, int64_t rows,
                                   int64_t stride, int64_t bias_size,
                                   int64_t out_size) {
  constexpr char kOp[] = "SoftplusBiasRows";
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows >= 0 && bias_size >= 1 && stride >= bias_size, kOp,
               "need rows >= 0, a bias, stride >= its size"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(kOp, "raw", raw_size,
                                     StridedExtent(rows, bias_size, stride)));
  return CheckSize(kOp, "out", out_size, rows * bias_size);
}

absl::Status CheckGatedGroupRmsNorm(int64_t z_size, int64_t z_stride,
                                    int64_t y_size, int64_t rows, int64_t width,
                                    int64_t groups, int64_t weight_size,
                                    double eps, int64_t out_size) {
  constexpr char kOp[] = "GatedGroupRmsNorm";
  TWICE_RETURN_IF_ERROR(CheckArg(
      rows >= 0 && width >= 1 && groups >= 1 && width % groups == 0 &&
          z_stride >= width && eps >= 0.0,
      kOp,
      "need rows >= 0, groups dividing width, z_stride >= width, eps >= 0"));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "z", z_size, StridedExtent(rows, width, z_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y_size, rows * width));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "weight", weight_size, width));
  return CheckSize(kOp, "out", out_size, rows * width);
}

absl::Status BiasSiluRows(absl::Span<float> x, int64_t rows,
                          absl::Span<const float> bias) {
  const int64_t cols = static_cast<int64_t>(bias.size());
  TWICE_RETURN_IF_ERROR(CheckBiasSiluRows(x.size(), rows, cols));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x.data() + r * cols;
    for (int64_t i = 0; i < cols; ++i) {
      const float v = row[i] + bias[i];
      row[i] = v / (1.0f + std::exp(-v));
    }
  }
  return absl::OkStatus();
}

absl::Status SoftplusBiasRows(absl::Span<const float> raw, int64_t rows,
                              int64_t stride, absl::Span<const float> bias,
                              absl::Span<float> out) {
  const int64_t cols = static_cast<int64_t>(bias.size());
  TWICE_RETURN_IF_ERROR(
      CheckSoftplusBiasRows(raw.size(), rows, stride, cols, out.size()));
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = raw.data() + r * stride;
    for (int64_t i = 0; i < cols; ++i) {
      const float v = in[i] + bias[i];
      out[r * cols + i] = v > kSoftplusThreshold ? v : std::log1p(std::exp(v));
    }
  }
  return absl::OkStatus();
}

absl::Status GatedGroupRmsNorm(absl::Span<const float> z, int64_t z_stride,
                               absl::Span<const float> y, int64_t rows,
                               int64_t width, int64_t groups,
                               absl::Span<const float> weight, double eps,
                               absl::Span<float> out) {
  TWICE_RETURN_IF_ERROR(CheckGatedGroupRmsNorm(z.size(), z_stride, y.size(),
                                               rows, width, groups,
                                               weight.size(), eps, out.size()));
  if (rows == 0) return absl::OkStatus();
  // out may alias y, which SiluMul reads element by element before writing.
  TWICE_RETURN_IF_ERROR(SiluMul(z, z_stride, y, width, rows, width, out));
  const int64_t group = width / groups;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      float* v = out.data() + r * width + g * group;
      double ss = 0.0;
      for (int64_t i = 0; i < group; ++i) ss += double{v[i]} * v[i];
      const float rstd = static_cast<float>(
          1.0 / std::sqrt(ss / static_cast<double>(group) + eps));
      const float* w = weight.data() + g * group;
      for (int64_t i = 0; i < group; ++i) v[i] = v[i] * rstd * w[i];
    }
  }
  return absl::OkStatus();
}

}  // namespace twice::kernels
