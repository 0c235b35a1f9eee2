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
#include <tuple>
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

namespace twice::kernels {
namespace {

// Per-pair routing: row r's j-th pair is the j-th expert of its RefTopK
// set in ascending order, gated as RouteTopK gates it; the pair combine
// equals the table combine (the same sum, term for term), checked against
// the float64 mixture too.
TEST(TopKRoutingPairsTest, PairsAreTheTablesRoutesInRowOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto& [rows, experts, k] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 64, 6},
        {17, 8, 3},
        {5, 4, 4},
        {33, 62, 8}}) {
    SCOPED_TRACE(::testing::Message() << rows << " " << experts << " " << k);
    std::vector<float> logits =
        RandomVector(rows * experts, RoutingSeed() + 70, 3.0f);
    if (k < experts) logits[0] = nan;        // ranks last: never chosen
    if (experts > 2) logits[2] = logits[1];  // a tie
    ASSERT_OK_AND_ASSIGN(const TopKRoutes routes,
                         RouteTopK(logits, rows, experts, k));
    std::vector<float> pair_experts(rows * k, -1.0f), gates(rows * k, -1.0f);
    ASSERT_OK(RouteTopKPairs(logits, rows, experts, k, {},
                             absl::MakeSpan(pair_experts),
                             absl::MakeSpan(gates)));
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int> want = RefTopK(logits, r, experts, k);
      std::sort(want.begin(), want.end());
      for (int64_t j = 0; j < k; ++j) {
        EXPECT_EQ(pair_experts[r * k + j], static_cast<float>(want[j]))
            << r << " " << j;
        EXPECT_EQ(gates[r * k + j], routes.gate[r * k + j]) << r << " " << j;
      }
    }
    const int64_t cols = 5;
    const std::vector<float> base = RandomVector(rows * cols, 71);
    const std::vector<float> results = RandomVector(rows * k * cols, 72);
    // The table combine reads routed rows by entry: the pair's result sits
    // at its entry's row there.
    std::vector<float> routed(results.size());
    for (int64_t p = 0; p < rows * k; ++p) {
      std::copy_n(results.begin() + p * cols, cols,
                  routed.begin() + routes.entry[p] * cols);
    }
    std::vector<float> by_table = RandomVector(rows * cols, 73);
    std::vector<float> by_pairs = by_table;
    const std::vector<float> before = by_table;
    ASSERT_OK(CombineRoutedRows(base, routed, cols, routes, 0.5f, true,
                                absl::MakeSpan(by_table)));
    ASSERT_OK(CombineRoutedPairs(base, results, cols, rows, k, gates, 0.5f,
                                 absl::MakeSpan(by_pairs)));
    EXPECT_EQ(by_pairs, by_table);
    std::vector<double> want(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        double sum = base[r * cols + c];
        for (int64_t j = 0; j < k; ++j) {
          sum += double{gates[r * k + j]} * results[(r * k + j) * cols + c];
        }
        want[r * cols + c] = before[r * cols + c] + 0.5 * sum;
      }
    }
    ExpectClose(by_pairs, want, 1e-5, 1e-5);
  }
}

// A padded step's extra rows (slots at or past the first pad slot, in
// any order among the real rows) take no expert and gate 0; every other
// row's pairs are what they are without padding.
TEST(TopKRoutingPairsTest, PaddingRowsTakeNoExpert) {
  const int64_t rows = 9, experts = 16, k = 3;
  const std::vector<float> logits =
      RandomVector(rows * experts, RoutingSeed() + 74, 3.0f);
  const std::vector<int32_t> slots = {4, 0, 8, 1, 9, 2, 3, 10, 5};
  const int32_t first_pad_slot = 8;  // rows 2, 4 and 7 pad the step
  std::vector<float> plain_experts(rows * k), plain_gates(rows * k);
  ASSERT_OK(RouteTopKPairs(logits, rows, experts, k, {},
                           absl::MakeSpan(plain_experts),
                           absl::MakeSpan(plain_gates)));
  std::vector<float> pair_experts(rows * k, 7.0f), gates(rows * k, 7.0f);
  ASSERT_OK(RouteTopKPairs(logits, rows, experts, k, {slots, first_pad_slot},
                           absl::MakeSpan(pair_experts),
                           absl::MakeSpan(gates)));
  for (int64_t p = 0; p < rows * k; ++p) {
    if (slots[p / k] >= first_pad_slot) {
      EXPECT_EQ(pair_experts[p], kNoExpert) << p;
      EXPECT_EQ(gates[p], 0.0f) << p;
    } else {
      EXPECT_EQ(pair_experts[p], plain_experts[p]) << p;
      EXPECT_EQ(gates[p], plain_gates[p]) << p;
    }
  }
}

TEST(TopKRoutingPairsTest, BadCallsAreRefusedWithNothingWritten) {
  const std::vector<float> logits = RandomVector(3 * 4, RoutingSeed());
  std::vector<float> experts(6, 9.0f), gates(6, 9.0f);
  EXPECT_EQ(
      RouteTopKPairs(logits, 3, 4, 2, {}, absl::MakeSpan(experts).subspan(1),
                     absl::MakeSpan(gates))
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RouteTopKPairs(logits, 3, 4, 5, {}, absl::MakeSpan(experts),
                           absl::MakeSpan(gates))
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Padding rows are known by one slot per row.
  const std::vector<int32_t> two_slots = {0, 1};
  EXPECT_EQ(RouteTopKPairs(logits, 3, 4, 2, {two_slots, 1},
                           absl::MakeSpan(experts), absl::MakeSpan(gates))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(experts, std::vector<float>(6, 9.0f));
  std::vector<float> x(3 * 2, 9.0f);
  const std::vector<float> base(3 * 2, 1.0f), routed(6 * 2, 1.0f);
  EXPECT_EQ(CombineRoutedPairs(base, routed, 2, 3, 2,
                               absl::MakeConstSpan(gates).subspan(1), 1.0f,
                               absl::MakeSpan(x))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CombineRoutedPairs(base, absl::MakeConstSpan(routed).subspan(2), 2,
                               3, 2, gates, 1.0f, absl::MakeSpan(x))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(x, std::vector<float>(6, 9.0f));
}

}  // namespace
}  // namespace twice::kernels
