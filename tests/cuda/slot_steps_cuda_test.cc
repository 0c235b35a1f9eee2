// The slot-indexed decode steps on CUDA against their CPU twins
// (kernels/slot_steps.h), f32: 1e-5 norm-wise relative for outputs and the
// whole state pools (slots not in the batch must come back unchanged), at
// tiny shapes and the 130M Mamba-2 / 360M Based shapes with 64 rows
// scattered over 80 slots. The Based steps run several steps in a row, so
// each reads the state the device wrote the step before; the window step's
// positions cover p = 0, p < L, p = L and ring wrap-around (p > L).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/slot_steps.h"
#include "kernels/taylor_feature_map.h"
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

TEST_F(SlotStepsCudaTest, LinearAttentionStepMatchesCpu) {
  // Tiny (hd 16, F 2 and 16) and 360M Based (H 16, hd 64, F 16) shapes.
  for (const LinearAttentionStepDims dims :
       {LinearAttentionStepDims{2, 16, 2}, LinearAttentionStepDims{2, 16, 16},
        LinearAttentionStepDims{16, 64, 16}}) {
    SCOPED_TRACE(::testing::Message()
                 << "H " << dims.heads << " hd " << dims.head_dim << " F "
                 << dims.feature_dim);
    const int rows = 64, capacity = 80;
    const int64_t h = dims.heads, hd = dims.head_dim, f = dims.feature_dim;
    const int64_t d = TaylorFeatureDim(f);
    const int64_t kv_slot = h * hd * d, z_slot = h * d;
    // Every slot carries a state of a few earlier tokens (a random z could
    // put a denominator near zero).
    std::vector<float> kv(capacity * kv_slot), z(capacity * z_slot);
    for (int s = 0; s < capacity; ++s) {
      std::vector<float> one_kv, one_z;
      testing::CarriedLinearAttentionState(h, hd, f, 3, 40 + 3 * s, one_kv,
                                           one_z);
      std::copy(one_kv.begin(), one_kv.end(), kv.begin() + s * kv_slot);
      std::copy(one_z.begin(), one_z.end(), z.begin() + s * z_slot);
    }
    DeviceBuffer dkv = Put(kv), dz = Put(z);
    for (int step = 0; step < 2; ++step) {
      const std::vector<int32_t> slots = ScatteredSlots(rows, capacity);
      const std::vector<float> q = Random(rows * h * f, 10 + step);
      const std::vector<float> k = Random(rows * h * f, 20 + step);
      const std::vector<float> v = Random(rows * h * hd, 30 + step);
      std::vector<float> y(rows * h * hd);
      ASSERT_OK(kernels::LinearAttentionStepSlots(
          q, k, v, dims, 1e-6f, absl::MakeSpan(kv), absl::MakeSpan(z), slots,
          absl::MakeSpan(y)));
      DeviceBuffer dq = Put(q), dk = Put(k), dv = Put(v), dslots = Put(slots);
      DeviceBuffer dy = Zeros<float>(rows * h * hd);
      const DeviceSlotRows map{slots, dslots.span<const int32_t>()};
      ASSERT_OK(LinearAttentionStepSlots(
          *stream_, dq.span<float>(), dk.span<float>(), dv.span<float>(), dims,
          1e-6f, dkv.span<float>(), dz.span<float>(), map, dy.span<float>()));
      TWICE_EXPECT_REL(Get<float>(dy), y, kF32Tolerance);
      TWICE_EXPECT_REL(Get<float>(dkv), kv, kF32Tolerance);
      TWICE_EXPECT_REL(Get<float>(dz), z, kF32Tolerance);
    }
  }
}

TEST_F(SlotStepsCudaTest, WindowAttentionStepMatchesCpu) {
  // Tiny heads (hd 16, 6: lanes past hd idle; 128: four dims a lane) and
  // the 360M Based window (H 16, hd 64, L 64).
  for (const WindowStepDims dims :
       {WindowStepDims{2, 16, 4}, WindowStepDims{3, 6, 5},
        WindowStepDims{2, 128, 8}, WindowStepDims{16, 64, 64}}) {
    SCOPED_TRACE(::testing::Message() << "H " << dims.heads << " hd "
                                      << dims.head_dim << " L " << dims.window);
    const int rows = 64, capacity = 80;
    const int64_t len = dims.window, width = dims.heads * dims.head_dim;
    const int64_t stride = 3 * width + 8;
    const int64_t ring_size = capacity * len * width;
    const float base = 10000.0f;
    const float scale = 1.0f / std::sqrt(static_cast<float>(dims.head_dim));
    const std::vector<int32_t> slots = ScatteredSlots(rows, capacity);
    // The first rows start at p = 0, L - 1, L, L + 1 and 2L + 1 (before,
    // at and past the first wrap of the ring), the others spread over
    // [0, 3L + 3).
    const int64_t firsts[] = {0, len - 1, len, len + 1, 2 * len + 1};
    std::vector<int64_t> positions(rows);
    for (int r = 0; r < rows; ++r) {
      positions[r] = r < 5 ? firsts[r] : (r * 7) % (3 * len + 3);
    }
    std::vector<float> ring_k = Random(ring_size, 50);
    std::vector<float> ring_v = Random(ring_size, 51);
    DeviceBuffer dring_k = Put(ring_k), dring_v = Put(ring_v);
    DeviceBuffer dslots = Put(slots);
    const DeviceSlotRows map{slots, dslots.span<const int32_t>()};
    for (int step = 0; step < 3; ++step) {
      const std::vector<float> qkv = Random(rows * stride, 60 + step);
      std::vector<float> y(rows * width);
      ASSERT_OK(kernels::WindowAttentionStepSlots(
          qkv, stride, dims, base, scale, positions, absl::MakeSpan(ring_k),
          absl::MakeSpan(ring_v), slots, absl::MakeSpan(y)));
      DeviceBuffer dqkv = Put(qkv), dpositions = Put(positions);
      DeviceBuffer dy = Zeros<float>(rows * width);
      ASSERT_OK(WindowAttentionStepSlots(
          *stream_, dqkv.span<float>(), stride, dims, base, scale,
          dpositions.span<const int64_t>(), positions, dring_k.span<float>(),
          dring_v.span<float>(), map, dy.span<float>()));
      TWICE_EXPECT_REL(Get<float>(dy), y, kF32Tolerance);
      TWICE_EXPECT_REL(Get<float>(dring_k), ring_k, kF32Tolerance);
      TWICE_EXPECT_REL(Get<float>(dring_v), ring_v, kF32Tolerance);
      EXPECT_EQ(Get<float>(dqkv), qkv);  // q and k rotated on copies
      for (int64_t& p : positions) ++p;
    }
  }
}

}  // namespace
}  // namespace twice::kernels::cuda
