// Top-k routing and the row moves of a mixture of experts
// (kernels/top_k_routing.h) against a float64 reference written here from
// the layer's equations (engine/layers/top_k_moe_mlp.h): each row's k
// largest logits (ties to the lower expert), a softmax over them, and
// out = scale · (base + Σ g_e · Y_e[row]) for random per-expert outputs
// Y_e, so the reference never looks at the route table. Bad tables are
// refused with nothing written.
//
// Seeds: fixed by default, TWICE_KERNEL_TEST_SEED picks another; printed.
#include "kernels/top_k_routing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels {
namespace {

using testing::ExpectClose;
using testing::RandomVector;

uint32_t RoutingSeed() {
  static const uint32_t seed = [] {
    const char* env = std::getenv("TWICE_KERNEL_TEST_SEED");
    const uint32_t s =
        env != nullptr ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10))
                       : 20261206u;
    std::printf("top-k routing seed %u\n", s);
    return s;
  }();
  return seed;
}

// Row r's k experts by (logit descending, index ascending), NaN last.
std::vector<int> RefTopK(const std::vector<float>& logits, int64_t r,
                         int64_t experts, int64_t k) {
  std::vector<int> order(static_cast<size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int e) {
    const double v = logits[r * experts + e];
    return std::isnan(v) ? -std::numeric_limits<double>::infinity() : v;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return key(a) > key(b); });
  order.resize(static_cast<size_t>(k));
  return order;
}

// The expert an entry belongs to, from the table's blocks.
int64_t ExpertOfEntry(const TopKRoutes& routes, int64_t i) {
  int64_t e = 0;
  while (routes.expert_begin[e + 1] <= i) ++e;
  return e;
}

struct RoutingCase {
  int64_t rows, experts, k;
};

class TopKRoutingTest : public ::testing::TestWithParam<RoutingCase> {};

TEST_P(TopKRoutingTest, CombineMatchesTheFloat64Mixture) {
  const RoutingCase c = GetParam();
  const int64_t cols = 24;
  const uint32_t seed =
      RoutingSeed() + static_cast<uint32_t>(c.rows * 131 + c.experts * 7 + c.k);
  const std::vector<float> logits =
      RandomVector(c.rows * c.experts, seed, 3.0f);
  ASSERT_OK_AND_ASSIGN(TopKRoutes routes,
                       RouteTopK(logits, c.rows, c.experts, c.k));
  ASSERT_OK(CheckRoutes(routes));
  // Every expert's block holds exactly the rows that chose it, ascending.
  for (int64_t e = 0; e < c.experts; ++e) {
    std::vector<int32_t> want;
    for (int64_t r = 0; r < c.rows; ++r) {
      const std::vector<int> top = RefTopK(logits, r, c.experts, c.k);
      if (std::find(top.begin(), top.end(), e) != top.end()) {
        want.push_back(static_cast<int32_t>(r));
      }
    }
    const std::vector<int32_t> got(
        routes.source_row.begin() + routes.expert_begin[e],
        routes.source_row.begin() + routes.expert_begin[e + 1]);
    EXPECT_EQ(got, want) << "expert " << e;
  }

  // Gather: the entries' rows of src, exactly.
  const std::vector<float> src = RandomVector(c.rows * cols, seed + 1);
  std::vector<float> gathered(static_cast<size_t>(c.rows * c.k * cols));
  ASSERT_OK(GatherRows(src, cols, routes.source_row, absl::MakeSpan(gathered)));
  for (int64_t i = 0; i < c.rows * c.k; ++i) {
    for (int64_t col = 0; col < cols; ++col) {
      ASSERT_EQ(gathered[i * cols + col],
                src[routes.source_row[i] * cols + col]);
    }
  }

  // Expert e's output for row r: Y[e][r] (random), placed at the entry.
  const std::vector<float> y =
      RandomVector(c.experts * c.rows * cols, seed + 2);
  std::vector<float> routed(gathered.size());
  for (int64_t i = 0; i < c.rows * c.k; ++i) {
    const int64_t e = ExpertOfEntry(routes, i);
    std::copy_n(y.begin() + (e * c.rows + routes.source_row[i]) * cols, cols,
                routed.begin() + i * cols);
  }
  const std::vector<float> base = RandomVector(c.rows * cols, seed + 3);
  const std::vector<float> x0 = RandomVector(c.rows * cols, seed + 4);
  const float scale = 0.375f;
  std::vector<double> want_set(base.size()), want_add(base.size());
  for (int64_t r = 0; r < c.rows; ++r) {
    const std::vector<int> top = RefTopK(logits, r, c.experts, c.k);
    const double max = logits[r * c.experts + top[0]];
    double sum = 0.0;
    for (int e : top) sum += std::exp(logits[r * c.experts + e] - max);
    for (int64_t col = 0; col < cols; ++col) {
      double v = base[r * cols + col];
      for (int e : top) {
        const double g = std::exp(logits[r * c.experts + e] - max) / sum;
        v += g * y[(e * c.rows + r) * cols + col];
      }
      want_set[r * cols + col] = scale * v;
      want_add[r * cols + col] = x0[r * cols + col] + scale * v;
    }
  }
  // f32 sums of k + 1 terms of magnitude <= 1: well inside 1e-5.
  std::vector<float> out(base.size(), -7.0f);
  ASSERT_OK(CombineRoutedRows(base, routed, cols, routes, scale,
                              /*accumulate=*/false, absl::MakeSpan(out)));
  ExpectClose(out, want_set, 1e-5, 1e-5, "combine");
  out = x0;
  ASSERT_OK(CombineRoutedRows(base, routed, cols, routes, scale,
                              /*accumulate=*/true, absl::MakeSpan(out)));
  ExpectClose(out, want_add, 1e-5, 1e-5, "combine into x");
  // In place over base (the host layer's call).
  out = base;
  ASSERT_OK(CombineRoutedRows(out, routed, cols, routes, scale,
                              /*accumulate=*/false, absl::MakeSpan(out)));
  ExpectClose(out, want_set, 1e-5, 1e-5, "in place");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TopKRoutingTest,
    ::testing::Values(RoutingCase{1, 4, 2}, RoutingCase{7, 4, 1},
                      RoutingCase{7, 5, 5}, RoutingCase{64, 64, 6},
                      RoutingCase{33, 62, 8}, RoutingCase{0, 4, 2}),
    [](const ::testing::TestParamInfo<RoutingCase>& i) {
      return "r" + std::to_string(i.param.rows) + "e" +
             std::to_string(i.param.experts) + "k" + std::to_string(i.param.k);
    });

TEST(TopKRoutingRulesTest, TiesGoToTheLowerExpertAndNanRanksLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Row 0: experts 1, 2 and 3 tie; row 1: a NaN where the largest would be.
  const std::vector<float> logits = {0.5f, 2.0f, 2.0f,  2.0f,
                                     nan,  1.0f, -1.0f, 0.0f};
  ASSERT_OK_AND_ASSIGN(TopKRoutes routes, RouteTopK(logits, 2, 4, 2));
  // Row 0 takes experts 1 and 2 with gates 1/2; row 1 experts 1 and 3.
  const std::vector<int64_t> begin = {0, 0, 2, 3, 4};
  EXPECT_EQ(routes.expert_begin, begin);
  EXPECT_EQ(routes.source_row, (std::vector<int32_t>{0, 1, 0, 1}));
  EXPECT_EQ(routes.entry, (std::vector<int32_t>{0, 2, 1, 3}));
  EXPECT_FLOAT_EQ(routes.gate[0], 0.5f);
  EXPECT_FLOAT_EQ(routes.gate[1], 0.5f);
  EXPECT_NEAR(routes.gate[2], 1.0 / (1.0 + std::exp(-1.0)), 1e-7);
  EXPECT_NEAR(routes.gate[3], 1.0 - 1.0 / (1.0 + std::exp(-1.0)), 1e-7);
}

TEST(TopKRoutingRulesTest, BadCallsAndTablesAreRefusedWithNothingWritten) {
  const std::vector<float> logits = RandomVector(3 * 4, RoutingSeed());
  for (int64_t k : {0, 5}) {
    EXPECT_EQ(RouteTopK(logits, 3, 4, k).status().code(),
              absl::StatusCode::kInvalidArgument)
        << k;
  }
  EXPECT_EQ(RouteTopK(logits, 4, 4, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(const TopKRoutes good, RouteTopK(logits, 3, 4, 2));

  const int64_t cols = 4;
  const std::vector<float> base(3 * cols, 1.0f), routed(6 * cols, 1.0f);
  auto refused = [&](const TopKRoutes& bad, const char* what) {
    EXPECT_EQ(CheckRoutes(bad).code(), absl::StatusCode::kInvalidArgument)
        << what;
    std::vector<float> out(3 * cols, 9.0f);
    EXPECT_EQ(CombineRoutedRows(base, routed, cols, bad, 1.0f, true,
                                absl::MakeSpan(out))
                  .code(),
              absl::StatusCode::kInvalidArgument)
        << what;
    EXPECT_EQ(out, std::vector<float>(3 * cols, 9.0f)) << what;
  };
  TopKRoutes bad = good;
  bad.entry[1] = bad.entry[0];
  refused(bad, "an entry used twice");
  bad = good;
  bad.entry[0] = 6;
  refused(bad, "an entry out of range");
  bad = good;
  std::swap(bad.source_row[bad.entry[0]], bad.source_row[bad.entry[2]]);
  refused(bad, "an entry reading another row");
  bad = good;
  bad.expert_begin[4] = 5;
  refused(bad, "blocks that do not end at rows·k");
  bad = good;
  bad.gate.pop_back();
  refused(bad, "a missing gate");

  std::vector<float> gathered(6 * cols, 9.0f);
  std::vector<int32_t> rows = good.source_row;
  rows[2] = 3;  // src has 3 rows
  EXPECT_EQ(GatherRows(base, cols, rows, absl::MakeSpan(gathered)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gathered, std::vector<float>(6 * cols, 9.0f));
  std::vector<float> short_out(3 * cols - 1);
  EXPECT_EQ(CombineRoutedRows(base, routed, cols, good, 1.0f, false,
                              absl::MakeSpan(short_out))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::kernels
