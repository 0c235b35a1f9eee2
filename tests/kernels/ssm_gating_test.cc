// The Mamba-2 gating kernels (kernels/ssm_gating.h) against float64
// references on random rows of odd widths: 1e-6 absolute + 1e-5 relative
// (a few roundings per element; the group statistics are double in both).
#include "kernels/ssm_gating.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels {
namespace {

using testing::ExpectClose;
using testing::RandomVector;

double SiluReference(double v) { return v / (1.0 + std::exp(-v)); }

TEST(SsmGatingTest, BiasSiluRowsMatchesReference) {
  const int rows = 7, cols = 37;
  std::vector<float> x = RandomVector(rows * cols, 11, 6.0f);
  const std::vector<float> bias = RandomVector(cols, 12, 2.0f);
  std::vector<double> want(x.size());
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < cols; ++i) {
      want[r * cols + i] = SiluReference(double{x[r * cols + i]} + bias[i]);
    }
  }
  ASSERT_OK(BiasSiluRows(absl::MakeSpan(x), rows, bias));
  ExpectClose(x, want, 1e-6, 1e-5);
  EXPECT_EQ(BiasSiluRows(absl::MakeSpan(x), rows + 1, bias).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SsmGatingTest, SoftplusBiasRowsReadsAStridedBlock) {
  // raw is a column range of a [rows, 50] matrix; values reach the
  // threshold where softplus(v) = v.
  const int rows = 9, heads = 13, stride = 50, offset = 31;
  const std::vector<float> raw = RandomVector(rows * stride, 21, 30.0f);
  const std::vector<float> bias = RandomVector(heads, 22, 3.0f);
  std::vector<double> want(rows * heads);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < heads; ++i) {
      const double v = double{raw[r * stride + offset + i]} + bias[i];
      want[r * heads + i] =
          v > kSoftplusThreshold ? v : std::log1p(std::exp(v));
    }
  }
  std::vector<float> out(rows * heads);
  ASSERT_OK(SoftplusBiasRows(absl::MakeConstSpan(raw).subspan(offset), rows,
                             stride, bias, absl::MakeSpan(out)));
  ExpectClose(out, want, 1e-6, 1e-5);
  EXPECT_EQ(SoftplusBiasRows(absl::MakeConstSpan(raw).subspan(offset + 10),
                             rows, stride, bias, absl::MakeSpan(out))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SsmGatingTest, GatedGroupRmsNormMatchesReferenceAndMayWriteOverY) {
  const int rows = 5, width = 48, groups = 3, z_stride = 70;
  const double eps = 1e-5;
  const std::vector<float> z = RandomVector(rows * z_stride, 31, 4.0f);
  const std::vector<float> y = RandomVector(rows * width, 32, 2.0f);
  const std::vector<float> w = RandomVector(width, 33, 1.5f);
  const int group = width / groups;
  std::vector<double> want(rows * width);
  for (int r = 0; r < rows; ++r) {
    for (int g = 0; g < groups; ++g) {
      std::vector<double> v(group);
      double ss = 0.0;
      for (int i = 0; i < group; ++i) {
        const int c = g * group + i;
        v[i] = double{y[r * width + c]} * SiluReference(z[r * z_stride + c]);
        ss += v[i] * v[i];
      }
      const double rstd = 1.0 / std::sqrt(ss / group + eps);
      for (int i = 0; i < group; ++i) {
        want[r * width + g * group + i] = v[i] * rstd * w[g * group + i];
      }
    }
  }
  std::vector<float> out(rows * width);
  ASSERT_OK(GatedGroupRmsNorm(z, z_stride, y, rows, width, groups, w, eps,
                              absl::MakeSpan(out)));
  ExpectClose(out, want, 1e-6, 1e-5);
  std::vector<float> in_place = y;
  ASSERT_OK(GatedGroupRmsNorm(z, z_stride, in_place, rows, width, groups, w,
                              eps, absl::MakeSpan(in_place)));
  EXPECT_EQ(in_place, out);
  EXPECT_EQ(GatedGroupRmsNorm(z, z_stride, y, rows, width, 5, w, eps,
                              absl::MakeSpan(out))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::kernels
