// RmsNorm, SiluMul / SwiGlu, RopeRotateHalf and TaylorFeatureMap against
// float64 references, serially and split over 1-8 threads, and the FastExp
// they use. Tolerances: 1e-6 absolute + 1e-5 relative (single roundings per
// element), 1e-5 for rotary at positions up to 10^5.
#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/activations.h"
#include "kernels/cpu/simd.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/taylor_feature_map.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels {
namespace {

using testing::ExpectClose;
using testing::RandomVector;

double Silu(double g) { return g / (1.0 + std::exp(-g)); }

TEST(RmsNormTest, MatchesReference) {
  const int rows = 5, dim = 96;
  const float eps = 1e-5f;
  const auto x = RandomVector(rows * dim, 1, 3.0f);
  const auto w = RandomVector(dim, 2);
  std::vector<double> want(rows * dim);
  for (int i = 0; i < rows; ++i) {
    double ss = 0.0;
    for (int j = 0; j < dim; ++j) ss += double{x[i * dim + j]} * x[i * dim + j];
    const double r = 1.0 / std::sqrt(ss / dim + eps);
    for (int j = 0; j < dim; ++j) want[i * dim + j] = x[i * dim + j] * r * w[j];
  }
  std::vector<float> y(rows * dim);
  ASSERT_OK(RmsNorm(x, rows, dim, w, eps, absl::MakeSpan(y)));
  ExpectClose(y, want, 1e-6, 1e-5);
  // In place gives the same result.
  std::vector<float> inplace = x;
  ASSERT_TRUE(
      RmsNorm(inplace, rows, dim, w, eps, absl::MakeSpan(inplace)).ok());
  EXPECT_EQ(inplace, y);
  EXPECT_FALSE(RmsNorm(x, rows, dim + 1, w, eps, absl::MakeSpan(y)).ok());
}

TEST(SiluMulTest, StridedViewsMatchReference) {
  // gate and mult are column ranges of one [rows, 3 * cols] matrix.
  const int rows = 4, cols = 10, stride = 30;
  const auto m = RandomVector(rows * stride, 3, 4.0f);
  std::vector<double> want(rows * cols);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) {
      want[i * cols + j] = Silu(m[i * stride + 5 + j]) * m[i * stride + 17 + j];
    }
  }
  std::vector<float> out(rows * cols);
  ASSERT_TRUE(SiluMul(absl::MakeConstSpan(m).subspan(5), stride,
                      absl::MakeConstSpan(m).subspan(17), stride, rows, cols,
                      absl::MakeSpan(out))
                  .ok());
  ExpectClose(out, want, 1e-6, 1e-5);
  // A view that runs past the end is refused.
  EXPECT_FALSE(SiluMul(absl::MakeConstSpan(m).subspan(25), stride,
                       absl::MakeConstSpan(m).subspan(17), stride, rows, cols,
                       absl::MakeSpan(out))
                   .ok());
}

TEST(SiluMulTest, InPlaceOverAContiguousGate) {
  // out may be the gate itself (BaseConv gates its convolution in place);
  // wide rows, so the vector loop body runs too.
  const int rows = 3, cols = 131;
  const auto gate = RandomVector(rows * cols, 7, 4.0f);
  const auto mult = RandomVector(rows * 2 * cols, 8);
  std::vector<float> want(rows * cols);
  ASSERT_OK(SiluMul(gate, cols, absl::MakeConstSpan(mult).subspan(cols),
                    2 * cols, rows, cols, absl::MakeSpan(want)));
  std::vector<float> inplace = gate;
  ASSERT_OK(SiluMul(inplace, cols, absl::MakeConstSpan(mult).subspan(cols),
                    2 * cols, rows, cols, absl::MakeSpan(inplace)));
  EXPECT_EQ(inplace, want);
  // Over a contiguous mult too (the gated RMSNorm gates in place so).
  std::vector<float> over_mult(rows * cols);
  for (int i = 0; i < rows; ++i) {
    std::copy_n(mult.begin() + i * 2 * cols + cols, cols,
                over_mult.begin() + i * cols);
  }
  ASSERT_OK(SiluMul(gate, cols, over_mult, cols, rows, cols,
                    absl::MakeSpan(over_mult)));
  EXPECT_EQ(over_mult, want);
  // Any other overlap is refused, and nothing is written.
  std::vector<float> wide = RandomVector(rows * 2 * cols, 9);
  const std::vector<float> before = wide;
  const absl::Span<float> rows_of_wide =
      absl::MakeSpan(wide).first(rows * cols);
  EXPECT_EQ(
      SiluMul(wide, 2 * cols, mult, 2 * cols, rows, cols, rows_of_wide).code(),
      absl::StatusCode::kInvalidArgument);  // a strided gate
  EXPECT_EQ(
      SiluMul(gate, cols, wide, 2 * cols, rows, cols, rows_of_wide).code(),
      absl::StatusCode::kInvalidArgument);  // over mult
  EXPECT_EQ(wide, before);
}

TEST(ReluSquaredTest, SquaresThePositivePart) {
  std::vector<float> x = {-2.0f, -0.0f, 0.0f, 0.5f, 3.0f, -1e-30f, 4.0f};
  ReluSquared(absl::MakeSpan(x));
  const std::vector<float> want = {0.0f, 0.0f, 0.0f, 0.25f, 9.0f, 0.0f, 16.0f};
  EXPECT_EQ(x, want);
}

TEST(SwiGluTest, SecondHalfIsTheGate) {
  const int rows = 3, hidden = 7;
  const auto u = RandomVector(rows * 2 * hidden, 4, 3.0f);
  std::vector<double> want(rows * hidden);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < hidden; ++j) {
      want[i * hidden + j] =
          u[i * 2 * hidden + j] * Silu(u[i * 2 * hidden + hidden + j]);
    }
  }
  std::vector<float> out(rows * hidden);
  ASSERT_OK(SwiGlu(u, rows, hidden, absl::MakeSpan(out)));
  ExpectClose(out, want, 1e-6, 1e-5);
}

// 40 rows: the CPU kernel's angles are exact every 16th row of a task and
// stepped by angle addition in between, so rows far from an anchor are
// checked too, at positions up to 10^5 and both ends of the frequencies.
TEST(RopeRotateHalfTest, MatchesReferenceAtLargePositions) {
  const int rows = 40, heads = 2;
  for (int hd : {8, 128}) {
    const int stride = heads * hd + 5;
    for (int64_t start : {int64_t{0}, int64_t{5}, int64_t{100000}}) {
      auto x = RandomVector(rows * stride, 5);
      std::vector<double> want(x.begin(), x.end());
      // The last row is not asked for (rows - 1): it keeps its input.
      for (int i = 0; i + 1 < rows; ++i) {
        for (int h = 0; h < heads; ++h) {
          for (int f = 0; f < hd / 2; ++f) {
            const double angle = static_cast<double>(start + i) *
                                 std::pow(10000.0, -2.0 * f / hd);
            const int a = i * stride + 3 + h * hd + f, b = a + hd / 2;
            want[a] = x[a] * std::cos(angle) - x[b] * std::sin(angle);
            want[b] = x[b] * std::cos(angle) + x[a] * std::sin(angle);
          }
        }
      }
      ASSERT_TRUE(RopeRotateHalf(absl::MakeSpan(x).subspan(3), rows - 1, stride,
                                 heads, hd, start, 10000.0f)
                      .ok());
      ExpectClose(x, want, 1e-5, 1e-5);
    }
  }
  std::vector<float> odd(10);
  EXPECT_FALSE(
      RopeRotateHalf(absl::MakeSpan(odd), 1, 10, 2, 5, 0, 10000.0f).ok());
}

TEST(TaylorFeatureMapTest, LayoutAndKernelIdentity) {
  const int rows = 6, f = 16, d = static_cast<int>(TaylorFeatureDim(f));
  ASSERT_EQ(d, 273);
  const auto x = RandomVector(rows * f, 6, 2.0f);
  std::vector<float> phi(rows * d);
  ASSERT_OK(TaylorFeatureMap(x, rows, f, absl::MakeSpan(phi)));
  std::vector<double> want(rows * d);
  for (int i = 0; i < rows; ++i) {
    want[i * d] = 1.0;
    for (int m = 0; m < f; ++m) want[i * d + 1 + m] = x[i * f + m] / 2.0;
    for (int m = 0; m < f; ++m) {
      for (int n = 0; n < f; ++n) {
        want[i * d + 1 + f + m * f + n] =
            double{x[i * f + m]} * x[i * f + n] / (std::sqrt(2.0) * 4.0);
      }
    }
  }
  ExpectClose(phi, want, 1e-6, 1e-5);
  // phi(q) · phi(k) = 1 + s + s^2 / 2 with s = q · k / sqrt(F).
  for (int i = 0; i + 1 < rows; ++i) {
    double s = 0.0, dot = 0.0;
    for (int m = 0; m < f; ++m) s += double{x[i * f + m]} * x[(i + 1) * f + m];
    s /= 4.0;
    for (int m = 0; m < d; ++m)
      dot += double{phi[i * d + m]} * phi[(i + 1) * d + m];
    EXPECT_NEAR(dot, 1.0 + s + s * s / 2.0, 1e-4 * (1.0 + s * s));
  }
}

// FastExp, the exponential behind SiLU and the window softmax: relative
// error < 2e-7 over the whole unclamped range, finite and ordered outside.
TEST(FastExpTest, AccurateOverTheRange) {
  double worst = 0.0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 200000.0f;
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(cpu::FastExp(x) - want) / want);
  }
  EXPECT_LT(worst, 2e-7);
  EXPECT_GT(cpu::FastExp(-1000.0f), 0.0f);
  EXPECT_TRUE(std::isfinite(cpu::FastExp(1000.0f)));
  EXPECT_EQ(cpu::FastExp(0.0f), 1.0f);
}

// Row counts large enough to be split over the pool, every thread count;
// SiLU gates far outside [-88, 88] stay exact to rounding (0 and g).
TEST(ElementwiseTest, ThreadedRowsMatchReference) {
  const int rows = 97, dim = 1024, heads = 16, hd = 64, f = 16;
  const auto x = RandomVector(rows * dim, 21, 3.0f);
  const auto w = RandomVector(dim, 22);
  auto g = RandomVector(rows * dim, 23, 8.0f);
  g[5] = -200.0f;
  g[6] = 200.0f;
  std::vector<double> norm(rows * dim), silu(rows * dim), rope(rows * dim);
  for (int i = 0; i < rows; ++i) {
    double ss = 0.0;
    for (int j = 0; j < dim; ++j) ss += double{x[i * dim + j]} * x[i * dim + j];
    const double r = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int j = 0; j < dim; ++j) {
      norm[i * dim + j] = x[i * dim + j] * r * w[j];
      silu[i * dim + j] = Silu(g[i * dim + j]) * x[i * dim + j];
    }
    for (int h = 0; h < heads; ++h) {
      for (int p = 0; p < hd / 2; ++p) {
        const double angle = (7.0 + i) * std::pow(10000.0, -2.0 * p / hd);
        const int a = i * dim + h * hd + p, b = a + hd / 2;
        rope[a] = x[a] * std::cos(angle) - x[b] * std::sin(angle);
        rope[b] = x[b] * std::cos(angle) + x[a] * std::sin(angle);
      }
    }
  }
  const int vecs = rows * heads, d = static_cast<int>(TaylorFeatureDim(f));
  const auto raw = RandomVector(vecs * f, 24, 2.0f);
  std::vector<double> phi(vecs * d);
  for (int i = 0; i < vecs; ++i) {
    phi[i * d] = 1.0;
    for (int m = 0; m < f; ++m) {
      phi[i * d + 1 + m] = raw[i * f + m] / 2.0;
      for (int n = 0; n < f; ++n) {
        phi[i * d + 1 + f + m * f + n] =
            double{raw[i * f + m]} * raw[i * f + n] / (std::sqrt(2.0) * 4.0);
      }
    }
  }
  testing::ForEachThreadCount([&](int) {
    std::vector<float> y(rows * dim);
    ASSERT_OK(RmsNorm(x, rows, dim, w, 1e-5f, absl::MakeSpan(y)));
    ExpectClose(y, norm, 1e-6, 1e-5, "rms_norm");
    ASSERT_OK(SiluMul(g, dim, x, dim, rows, dim, absl::MakeSpan(y)));
    ExpectClose(y, silu, 1e-6, 1e-5, "silu_mul");
    y = x;
    ASSERT_TRUE(
        RopeRotateHalf(absl::MakeSpan(y), rows, dim, heads, hd, 7, 10000.0f)
            .ok());
    ExpectClose(y, rope, 1e-5, 1e-5, "rope");
    std::vector<float> out(vecs * d);
    ASSERT_OK(TaylorFeatureMap(raw, vecs, f, absl::MakeSpan(out)));
    ExpectClose(out, phi, 1e-6, 1e-5, "taylor");
  });
}

}  // namespace
}  // namespace twice::kernels
