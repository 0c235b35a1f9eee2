// The slot-indexed decode steps on CUDA against their CPU twins
// (kernels/slot_steps.h), f32: 1e-5 norm-wise relative for outputs and the
// whole state pools (slots not in the batch must come back unchanged), at
// the tiny and 130M Mamba-2 shapes with 64 rows scattered over 80 slots.
#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/slot_steps.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::cuda {
namespace {

using testing::CudaTest;
using testing::kF32Tolerance;
using testing::Random;

using SlotStepsCudaTest = CudaTest;

// `rows` distinct slots of `capacity`, in a shuffled order.
std::vector<int32_t> ScatteredSlots(int rows, int capacity) {
  std::vector<int32_t> all(capacity);
  std::iota(all.begin(), all.end(), 0);
  std::mt19937 rng(testing::TestSeed());
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(rows);
  return all;
}

TEST_F(SlotStepsCudaTest, ConvStepMatchesCpu) {
  for (auto [channels, stride] : {std::pair{160, 296}, std::pair{1792, 3352}}) {
    const int rows = 64, capacity = 80, k = 4;
    const std::vector<int32_t> slots = ScatteredSlots(rows, capacity);
    const std::vector<float> x = Random(rows * stride, 1);
    const std::vector<float> w = Random(channels * k, 2);
    std::vector<float> tails = Random(capacity * (k - 1) * channels, 3);
    DeviceBuffer dx = Put(x), dw = Put(w), dtails = Put(tails),
                 dslots = Put(slots);
    DeviceBuffer dout = Zeros<float>(rows * channels);
    std::vector<float> out(rows * channels);
    ASSERT_OK(kernels::CausalConv1dStepSlots(x, channels, stride, w, k,
                                             absl::MakeSpan(tails), slots,
                                             absl::MakeSpan(out)));
    const DeviceSlotRows map{slots, dslots.span<const int32_t>()};
    ASSERT_OK(CausalConv1dStepSlots(
        *stream_, dx.span<float>(), channels, stride, dw.span<float>(), k,
        dtails.span<float>(), map, dout.span<float>()));
    TWICE_EXPECT_REL(Get<float>(dout), out, kF32Tolerance);
    TWICE_EXPECT_REL(Get<float>(dtails), tails, kF32Tolerance);
  }
}

TEST_F(SlotStepsCudaTest, SsdStepMatchesCpu) {
  // Tiny (H 8, P 16, N 16) and 130M (H 24, P 64, N 128) shapes.
  for (const SsdShape shape :
       {SsdShape{8, 16, 1, 16}, SsdShape{24, 64, 1, 128}}) {
    const int rows = 64, capacity = 80;
    const int64_t hp = shape.heads * shape.head_dim;
    const int64_t gn = shape.groups * shape.state;
    const int64_t stride = hp + 2 * gn;
    const std::vector<int32_t> slots = ScatteredSlots(rows, capacity);
    const std::vector<float> xbc = Random(rows * stride, 4);
    std::vector<float> dt = Random(rows * shape.heads, 5, 0.5f);
    for (float& v : dt) v = std::abs(v);
    std::vector<float> a = Random(shape.heads, 6, 2.0f);
    for (float& v : a) v = -std::abs(v);
    const std::vector<float> d = Random(shape.heads, 7);
    std::vector<float> states = Random(int64_t{capacity} * hp * shape.state, 8);
    DeviceBuffer dxbc = Put(xbc), ddt = Put(dt), da = Put(a), dd = Put(d),
                 dstates = Put(states), dslots = Put(slots);
    DeviceBuffer dy = Zeros<float>(rows * hp);
    std::vector<float> y(rows * hp);
    const absl::Span<const float> all = xbc;
    ASSERT_OK(kernels::SsdStepSlots(
        shape, all, stride, all.subspan(hp), all.subspan(hp + gn), stride, dt,
        a, d, absl::MakeSpan(states), slots, absl::MakeSpan(y)));
    const DeviceSpan<const float> dall = dxbc.span<const float>();
    const DeviceSlotRows map{slots, dslots.span<const int32_t>()};
    ASSERT_OK(SsdStepSlots(
        *stream_, shape, dall, stride, dall.subspan(hp, dall.size - hp),
        dall.subspan(hp + gn, dall.size - hp - gn), stride, ddt.span<float>(),
        da.span<float>(), dd.span<float>(), dstates.span<float>(), map,
        dy.span<float>()));
    TWICE_EXPECT_REL(Get<float>(dy), y, kF32Tolerance);
    TWICE_EXPECT_REL(Get<float>(dstates), states, kF32Tolerance);
  }
}

}  // namespace
}  // namespace twice::kernels::cuda
