// The CUDA mixture-of-experts kernels (routed_pairs_cuda.cu,
// top_k_routing_cuda.cu) replayed on the CPU (cuda_replay.h) against their
// CPU twins (kernels/top_k_routing.h) and a float64 product, in both thread
// orders: routing per pair with padding rows, the grouped bf16 products,
// the combines, and the gather of routed rows.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/cuda/launch.h"
#include "kernels/top_k_routing.h"
#include "tests/cuda_replay/replay_test_util.h"

namespace twice::cuda_replay {
namespace {

namespace launch = kernels::cuda::launch;
using testing::kF32Tolerance;
using testing::kThreadOrders;
using testing::Random;

struct Shape {
  int64_t rows, experts, k, n, cols;
};

TEST(RoutingReplayTest, PairsProductsAndCombineMatchCpu) {
  for (const Shape& c : {Shape{7, 5, 2, 33, 67}, Shape{3, 40, 32, 8, 64},
                         Shape{20, 16, 4, 24, 96}}) {
    SCOPED_TRACE(::testing::Message()
                 << c.rows << " rows, E " << c.experts << ", k " << c.k
                 << ", W [" << c.n << ", " << c.cols << "]");
    const int64_t pairs = c.rows * c.k;
    std::vector<float> logits = Random(c.rows * c.experts, 1, 3.0f);
    logits[1] = logits[0];  // a tie
    // The last quarter of rows pad a step (their slots listed in reverse).
    std::vector<int32_t> slots(c.rows);
    for (int64_t r = 0; r < c.rows; ++r) {
      slots[r] = static_cast<int32_t>(c.rows - 1 - r);
    }
    const int32_t first_pad = static_cast<int32_t>(c.rows - c.rows / 4);
    std::vector<float> want_experts(pairs), want_gates(pairs);
    ASSERT_TRUE(kernels::RouteTopKPairs(
                    logits, c.rows, c.experts, c.k, {slots, first_pad},
                    absl::MakeSpan(want_experts), absl::MakeSpan(want_gates))
                    .ok());
    // The experts' matrices in bf16, and x.
    std::vector<std::vector<uint16_t>> w_bits(c.experts);
    std::vector<std::vector<float>> w(c.experts);
    std::vector<const uint16_t*> pointers;
    for (int64_t e = 0; e < c.experts; ++e) {
      w[e] = Random(c.n * c.cols, 10 + static_cast<uint32_t>(e), 0.1f);
      for (float& v : w[e]) {
        w_bits[e].push_back(testing::ToBf16Bits(v));
        v = testing::RoundedToBf16(v);
      }
      pointers.push_back(w_bits[e].data());
    }
    const std::vector<float> x = Random(c.rows * c.cols, 5);
    std::vector<float> want_y(pairs * c.n);
    for (int64_t p = 0; p < pairs; ++p) {
      if (want_experts[p] == kernels::kNoExpert) continue;  // zeros
      const std::vector<float>& we = w[static_cast<int64_t>(want_experts[p])];
      for (int64_t i = 0; i < c.n; ++i) {
        double dot = 0.0;
        for (int64_t j = 0; j < c.cols; ++j) {
          dot += double{we[i * c.cols + j]} *
                 testing::RoundedToBf16(x[p / c.k * c.cols + j]);
        }
        want_y[p * c.n + i] = static_cast<float>(dot);
      }
    }
    const std::vector<float> base = Random(c.rows * c.cols, 6);
    const std::vector<float> routed = Random(pairs * c.cols, 7);
    const std::vector<float> x0 = Random(c.rows * c.cols, 8);
    std::vector<float> want_x = x0;
    ASSERT_TRUE(kernels::CombineRoutedPairs(base, routed, c.cols, c.rows, c.k,
                                            want_gates, 0.25f,
                                            absl::MakeSpan(want_x))
                    .ok());
    for (const ThreadOrder order : kThreadOrders) {
      SetThreadOrder(order);
      std::vector<float> experts(pairs, NAN), gates(pairs, NAN);
      ASSERT_EQ(launch::RouteTopKPairs(
                    logits.data(), c.rows, static_cast<int>(c.experts),
                    static_cast<int>(c.k), slots.data(), first_pad,
                    experts.data(), gates.data(), nullptr),
                cudaSuccess);
      EXPECT_EQ(experts, want_experts);
      TWICE_EXPECT_REPLAY_REL(gates, want_gates, 1e-6);
      std::vector<int32_t> workspace(c.experts + c.experts * pairs, -7);
      std::vector<float> y(pairs * c.n, NAN);
      ASSERT_EQ(launch::RoutedLinear(x.data(), c.k, pointers.data(),
                                     static_cast<int>(c.experts), c.n, c.cols,
                                     experts.data(), pairs, workspace.data(),
                                     y.data(), nullptr),
                cudaSuccess);
      TWICE_EXPECT_REPLAY_REL(y, want_y, kF32Tolerance);
      std::vector<float> got_x = x0;
      ASSERT_EQ(
          launch::CombineRoutedPairs(base.data(), routed.data(), c.cols, c.rows,
                                     static_cast<int>(c.k), gates.data(), 0.25f,
                                     got_x.data(), nullptr),
          cudaSuccess);
      TWICE_EXPECT_REPLAY_REL(got_x, want_x, kF32Tolerance);
    }
  }
}

TEST(RoutingReplayTest, GatherAndCombineRowsMatchCpu) {
  const int64_t rows = 37, experts = 4, k = 2, cols = 64;
  const std::vector<float> logits = Random(rows * experts, 1, 3.0f);
  const auto routes = kernels::RouteTopK(logits, rows, experts, k);
  ASSERT_TRUE(routes.ok());
  const int64_t n = rows * k;
  const std::vector<float> h = Random(rows * cols, 2);
  std::vector<float> want_gathered(n * cols);
  ASSERT_TRUE(kernels::GatherRows(h, cols, routes->source_row,
                                  absl::MakeSpan(want_gathered))
                  .ok());
  const std::vector<float> base = Random(rows * cols, 3);
  const std::vector<float> routed = Random(n * cols, 4);
  const std::vector<float> x0 = Random(rows * cols, 5);
  std::vector<float> want_x = x0;
  ASSERT_TRUE(kernels::CombineRoutedRows(base, routed, cols, *routes, 0.25f,
                                         /*accumulate=*/true,
                                         absl::MakeSpan(want_x))
                  .ok());
  for (const ThreadOrder order : kThreadOrders) {
    SetThreadOrder(order);
    std::vector<float> gathered(n * cols, NAN), x = x0;
    ASSERT_EQ(launch::GatherRows(h.data(), cols, routes->source_row.data(), n,
                                 gathered.data(), nullptr),
              cudaSuccess);
    EXPECT_EQ(gathered, want_gathered);
    ASSERT_EQ(launch::CombineRoutedRows(
                  base.data(), routed.data(), cols, routes->entry.data(),
                  routes->gate.data(), rows, static_cast<int>(k), 0.25f,
                  x.data(), nullptr),
              cudaSuccess);
    TWICE_EXPECT_REPLAY_REL(x, want_x, kF32Tolerance);
  }
}

}  // namespace
}  // namespace twice::cuda_replay
