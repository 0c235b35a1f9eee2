// A mixture of experts routed per (row, choice) pair on CUDA
// (kernels/cuda/routed_pairs_cuda.cu) against the CPU: RouteTopKPairs
// gives the CPU twin's experts exactly and its gates within 1e-6 (the
// softmax in double, the device's exp); RoutedLinear against a float64
// product of the bf16 weights and the bf16-rounded rows, within 1e-5
// norm-wise (f32 sums); CombineRoutedPairs against its CPU twin within
// f32 summation order. Rows of up to 256 sequences over 64 experts (a
// Granite-4.0-H tiny step) and odd shapes, a quarter of the rows padding
// (no expert: zero products); outputs start as NaN, so a launch that did
// nothing fails. Bad arguments are refused before any launch.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/top_k_routing.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::cuda {
namespace {

using testing::CudaTest;
using testing::kF32Tolerance;
using testing::Random;

using RoutedPairsCudaTest = CudaTest;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Shape {
  int64_t rows, experts, k, n, cols;
};

TEST_F(RoutedPairsCudaTest, RoutesProductsAndCombineMatchCpu) {
  for (const Shape& c : {Shape{1, 64, 6, 256, 1536}, Shape{256, 64, 6, 96, 128},
                         Shape{7, 5, 2, 33, 67}, Shape{3, 40, 32, 8, 64}}) {
    SCOPED_TRACE(::testing::Message()
                 << c.rows << " rows, E " << c.experts << ", k " << c.k
                 << ", W [" << c.n << ", " << c.cols << "]");
    const int64_t pairs = c.rows * c.k;
    std::vector<float> logits = Random(c.rows * c.experts, 1, 3.0f);
    logits[1] = logits[0];  // a tie
    // A padded step's last quarter of rows (slots from rows - rows / 4 on,
    // listed in reverse) take no expert: their products are zeros.
    std::vector<int32_t> slots(c.rows);
    for (int64_t r = 0; r < c.rows; ++r) {
      slots[r] = static_cast<int32_t>(c.rows - 1 - r);
    }
    const int32_t first_pad_slot = static_cast<int32_t>(c.rows - c.rows / 4);
    std::vector<float> want_experts(pairs), want_gates(pairs);
    ASSERT_OK(kernels::RouteTopKPairs(
        logits, c.rows, c.experts, c.k, {slots, first_pad_slot},
        absl::MakeSpan(want_experts), absl::MakeSpan(want_gates)));
    DeviceBuffer dlogits = Put(logits);
    DeviceBuffer dslots = Put(slots);
    DeviceBuffer dexperts = Put(std::vector<float>(pairs, kNaN));
    DeviceBuffer dgates = Put(std::vector<float>(pairs, kNaN));
    ASSERT_OK(RouteTopKPairs(*stream_, dlogits.span<const float>(), c.rows,
                             c.experts, c.k,
                             {dslots.span<const int32_t>(), first_pad_slot},
                             dexperts.span<float>(), dgates.span<float>()));
    EXPECT_EQ(Get<float>(dexperts), want_experts);
    const std::vector<float> gates = Get<float>(dgates);
    for (int64_t p = 0; p < pairs; ++p) {
      EXPECT_NEAR(gates[p], want_gates[p], 1e-6 * std::abs(want_gates[p])) << p;
    }

    // The experts' matrices, bf16 on the device, and the float64 product
    // of the gate-up form (x row r for pairs r·k + j) and of the down
    // form (x row p for pair p).
    std::vector<std::vector<float>> w(c.experts);
    std::vector<DeviceBuffer> dw;
    std::vector<const Bf16*> pointers;
    for (int64_t e = 0; e < c.experts; ++e) {
      w[e] = testing::FromBf16Vector(testing::ToBf16Vector(
          Random(c.n * c.cols, 10 + static_cast<uint32_t>(e), 0.1f)));
      dw.push_back(PutBf16(w[e]));
      pointers.push_back(dw.back().span<const Bf16>().data);
    }
    DeviceBuffer dpointers = Put(pointers);
    const RoutedWeights weights{{dpointers.span<const Bf16*>().data, c.experts},
                                c.experts,
                                c.n,
                                c.cols};
    for (const int64_t group : {c.k, int64_t{1}}) {
      SCOPED_TRACE(::testing::Message() << "x_group " << group);
      const std::vector<float> x = Random(pairs / group * c.cols, 5);
      const std::vector<float> x16 =
          testing::FromBf16Vector(testing::ToBf16Vector(x));
      std::vector<double> want(pairs * c.n);
      for (int64_t p = 0; p < pairs; ++p) {
        if (want_experts[p] == kernels::kNoExpert) continue;  // zeros
        const auto& we = w[static_cast<int64_t>(want_experts[p])];
        const float* xr = x16.data() + p / group * c.cols;
        for (int64_t i = 0; i < c.n; ++i) {
          double dot = 0.0;
          for (int64_t j = 0; j < c.cols; ++j) {
            dot += double{we[i * c.cols + j]} * xr[j];
          }
          want[p * c.n + i] = dot;
        }
      }
      DeviceBuffer dx = Put(x);
      DeviceBuffer dy = Put(std::vector<float>(pairs * c.n, kNaN));
      DeviceBuffer workspace =
          Zeros<int32_t>(RoutedLinearWorkspace(c.experts, pairs));
      ASSERT_OK(RoutedLinear(*stream_, dx.span<const float>(), group, weights,
                             dexperts.span<const float>(), pairs,
                             workspace.span<int32_t>(), dy.span<float>()));
      const std::vector<float> y = Get<float>(dy);
      std::vector<float> want_f(want.begin(), want.end());
      TWICE_EXPECT_REL(y, want_f, kF32Tolerance);
    }

    const std::vector<float> base = Random(c.rows * c.cols, 6);
    const std::vector<float> routed = Random(pairs * c.cols, 7);
    std::vector<float> x = Random(c.rows * c.cols, 8);
    DeviceBuffer dbase = Put(base), drouted = Put(routed), dx = Put(x);
    ASSERT_OK(kernels::CombineRoutedPairs(base, routed, c.cols, c.rows, c.k,
                                          want_gates, 0.25f,
                                          absl::MakeSpan(x)));
    ASSERT_OK(CombineRoutedPairs(*stream_, dbase.span<const float>(),
                                 drouted.span<const float>(), c.cols, c.rows,
                                 c.k, dgates.span<const float>(), 0.25f,
                                 dx.span<float>()));
    TWICE_EXPECT_REL(Get<float>(dx), x, kF32Tolerance);
  }
}

TEST_F(RoutedPairsCudaTest, BadCallsAreRefusedBeforeAnyLaunch) {
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  DeviceBuffer logits = Put(Random(3 * 8, 1));
  DeviceBuffer experts = Put(std::vector<float>(6, kNaN));
  DeviceBuffer gates = Put(std::vector<float>(6, kNaN));
  const DeviceSpan<const float> l = logits.span<const float>();
  // k above the experts, above 32, outputs of the wrong size.
  EXPECT_EQ(RouteTopKPairs(*stream_, l, 3, 8, 9, {}, experts.span<float>(),
                           gates.span<float>())
                .code(),
            kInvalid);
  EXPECT_EQ(
      RouteTopKPairs(*stream_, l, 3, 8, 2, {},
                     experts.span<float>().subspan(0, 5), gates.span<float>())
          .code(),
      kInvalid);
  // Padding rows are known by one slot per row.
  DeviceBuffer two_slots = Put(std::vector<int32_t>{0, 1});
  EXPECT_EQ(
      RouteTopKPairs(*stream_, l, 3, 8, 2, {two_slots.span<const int32_t>(), 1},
                     experts.span<float>(), gates.span<float>())
          .code(),
      kInvalid);
  EXPECT_TRUE(std::isnan(Get<float>(experts)[0]));

  DeviceBuffer w = PutBf16(Random(4 * 16, 2));
  const std::vector<const Bf16*> pointers(8, w.span<const Bf16>().data);
  DeviceBuffer dpointers = Put(pointers);
  const RoutedWeights weights{
      {dpointers.span<const Bf16*>().data, 8}, 8, 4, 16};
  DeviceBuffer x = Put(Random(3 * 16, 3));
  DeviceBuffer y = Put(std::vector<float>(6 * 4, kNaN));
  DeviceBuffer workspace = Zeros<int32_t>(RoutedLinearWorkspace(8, 6));
  auto routed = [&](int64_t group, const RoutedWeights& wt,
                    DeviceSpan<int32_t> ws, DeviceSpan<float> out) {
    return RoutedLinear(*stream_, x.span<const float>(), group, wt,
                        experts.span<const float>(), 6, ws, out)
        .code();
  };
  EXPECT_EQ(routed(4, weights, workspace.span<int32_t>(), y.span<float>()),
            kInvalid);  // 6 pairs are not whole groups of 4
  EXPECT_EQ(routed(1, weights, workspace.span<int32_t>(), y.span<float>()),
            kInvalid);  // x holds 3 rows, not 6
  EXPECT_EQ(routed(2, weights, workspace.span<int32_t>().subspan(0, 10),
                   y.span<float>()),
            kInvalid);
  EXPECT_EQ(routed(2, weights, workspace.span<int32_t>(),
                   y.span<float>().subspan(0, 23)),
            kInvalid);
  RoutedWeights short_table = weights;
  short_table.matrices.size = 7;
  EXPECT_EQ(routed(2, short_table, workspace.span<int32_t>(), y.span<float>()),
            kInvalid);
  EXPECT_TRUE(std::isnan(Get<float>(y)[0]));

  DeviceBuffer base = Put(Random(3 * 4, 4)), sum = Put(Random(6 * 4, 5));
  DeviceBuffer out = Put(std::vector<float>(3 * 4, kNaN));
  EXPECT_EQ(CombineRoutedPairs(*stream_, base.span<const float>(),
                               sum.span<const float>(), 4, 3, 2,
                               gates.span<const float>().subspan(0, 5), 1.0f,
                               out.span<float>())
                .code(),
            kInvalid);
  EXPECT_TRUE(std::isnan(Get<float>(out)[0]));
}

}  // namespace
}  // namespace twice::kernels::cuda
