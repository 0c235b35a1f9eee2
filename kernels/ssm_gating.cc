#include "kernels/ssm_gating.h"

#include <cmath>

#include "kernels/activations.h"
#include "kernels/check.h"
#include "kernels/status_macros.h"

namespace twice::kernels {

absl::Status BiasSiluRows(absl::Span<float> x, int64_t rows,
                          absl::Span<const float> bias) {
  constexpr char kOp[] = "BiasSiluRows";
  const int64_t cols = static_cast<int64_t>(bias.size());
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows >= 0 && cols >= 1, kOp, "need rows >= 0 and a bias"));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "x", x.size(), rows * cols));
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
  constexpr char kOp[] = "SoftplusBiasRows";
  const int64_t cols = static_cast<int64_t>(bias.size());
  TWICE_RETURN_IF_ERROR(CheckArg(rows >= 0 && cols >= 1 && stride >= cols, kOp,
                                 "need rows >= 0, a bias, stride >= its size"));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "raw", raw.size(), StridedExtent(rows, cols, stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size(), rows * cols));
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
  constexpr char kOp[] = "GatedGroupRmsNorm";
  TWICE_RETURN_IF_ERROR(CheckArg(
      rows >= 0 && width >= 1 && groups >= 1 && width % groups == 0 &&
          z_stride >= width && eps >= 0.0,
      kOp,
      "need rows >= 0, groups dividing width, z_stride >= width, eps >= 0"));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y.size(), rows * width));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "weight", weight.size(), width));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size(), rows * width));
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
