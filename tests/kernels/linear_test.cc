// Linear (BLAS GEMM / GEMV) against a float64 reference, with and without
// bias, single and multiple rows, serial and split over 1-8 threads.
// Tolerance 1e-5 + 1e-5 relative (k <= 1000, inputs in [-1, 1]).
#include "kernels/linear.h"

#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels {
namespace {

using testing::ExpectClose;
using testing::RandomVector;

std::vector<double> Reference(const std::vector<float>& x, int m, int k,
                              const std::vector<float>& w, int n,
                              const std::vector<float>& bias) {
  std::vector<double> y(m * n);
  for (int i = 0; i < m; ++i) {
    for (int o = 0; o < n; ++o) {
      double acc = bias.empty() ? 0.0 : bias[o];
      for (int j = 0; j < k; ++j) acc += double{x[i * k + j]} * w[o * k + j];
      y[i * n + o] = acc;
    }
  }
  return y;
}

TEST(LinearTest, MatchesReference) {
  for (auto [m, k, n] :
       {std::tuple{1, 64, 48}, std::tuple{7, 33, 5}, std::tuple{64, 300, 129},
        std::tuple{2, 1, 1}, std::tuple{3, 17, 9}}) {
    for (bool with_bias : {false, true}) {
      const auto x = RandomVector(m * k, 1);
      const auto w = RandomVector(n * k, 2);
      const auto b = with_bias ? RandomVector(n, 3) : std::vector<float>{};
      std::vector<float> y(m * n, 123.0f);  // overwritten, not accumulated
      ASSERT_OK(Linear(x, m, k, w, n, b, absl::MakeSpan(y)));
      ExpectClose(y, Reference(x, m, k, w, n, b), 1e-5, 1e-5);
    }
  }
}

// Shapes that take each way of splitting over the pool: by columns of y
// (wide n), by rows of x (narrow n), GEMV rows (m = 1, large W), the
// few-rows kernel (m = 2..16, odd m and row counts not a multiple of its
// blocks), the first SGEMM size after it (m = 17), plus slices that end
// mid-block; every thread count gives the serial result.
TEST(LinearTest, ParallelSplitsMatchReference) {
  testing::ForEachThreadCount([](int) {
    for (auto [m, k, n] :
         {std::tuple{40, 64, 520}, std::tuple{300, 64, 50},
          std::tuple{1, 100, 1000}, std::tuple{1, 1000, 77},
          std::tuple{2, 100, 1000}, std::tuple{5, 333, 203},
          std::tuple{8, 1000, 77}, std::tuple{16, 200, 600},
          std::tuple{17, 200, 600}, std::tuple{129, 96, 257}}) {
      for (bool with_bias : {false, true}) {
        const auto x = RandomVector(m * k, 7);
        const auto w = RandomVector(n * k, 8);
        const auto b = with_bias ? RandomVector(n, 9) : std::vector<float>{};
        std::vector<float> y(m * n, 123.0f);
        ASSERT_OK(Linear(x, m, k, w, n, b, absl::MakeSpan(y)));
        ExpectClose(y, Reference(x, m, k, w, n, b), 1e-5, 1e-5,
                    "m " + std::to_string(m) + " n " + std::to_string(n));
      }
    }
  });
}

TEST(LinearTest, ZeroRowsIsANoOp) {
  std::vector<float> w(6);
  EXPECT_OK(Linear({}, 0, 3, w, 2, {}, {}));
}

TEST(LinearTest, RejectsMismatchedSizes) {
  std::vector<float> x(6), w(6), y(4), b(3);
  EXPECT_FALSE(Linear(x, 2, 3, w, 3, {}, absl::MakeSpan(y)).ok());  // w 9
  EXPECT_FALSE(Linear(x, 2, 3, w, 2, b, absl::MakeSpan(y)).ok());   // bias 2
  EXPECT_FALSE(Linear(x, 3, 3, w, 2, {}, absl::MakeSpan(y)).ok());  // x 9
  std::vector<float> y2(4);
  auto s = Linear(x, 2, 3, w, 2, {}, absl::MakeSpan(y2));
  EXPECT_OK(s);
  EXPECT_EQ(Linear(x, 2, 3, w, 2, {}, absl::MakeSpan(y2).subspan(1)).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::kernels
