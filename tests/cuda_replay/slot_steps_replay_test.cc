// The CUDA slot-indexed decode-step kernels (slot_steps_cuda.cu) replayed
// on the CPU (cuda_replay.h) against their CPU twins (kernels/slot_steps.h),
// in both thread orders: the causal convolution's step, the Mamba-2 SSD
// step and the sliding-window attention step with its ring, each row
// reading and writing the state of its own slot among more slots than rows.
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/cuda/launch.h"
#include "kernels/slot_steps.h"
#include "tests/cuda_replay/replay_test_util.h"

namespace twice::cuda_replay {
namespace {

namespace launch = kernels::cuda::launch;
using testing::kF32Tolerance;
using testing::kThreadOrders;
using testing::Random;

const std::vector<int32_t> kSlots = {5, 0, 3, 6};  // of 7
constexpr int64_t kCapacity = 7;

TEST(SlotStepsReplayTest, ConvStepMatchesCpu) {
  const int64_t channels = 70, stride = 75, kernel = 4;
  const int64_t rows = static_cast<int64_t>(kSlots.size());
  const std::vector<float> x = Random(rows * stride, 1);
  const std::vector<float> w = Random(channels * kernel, 2);
  const std::vector<float> tails =
      Random(kCapacity * channels * (kernel - 1), 3);
  std::vector<float> want_tails = tails, want(rows * channels);
  ASSERT_TRUE(kernels::CausalConv1dStepSlots(x, channels, stride, w, kernel,
                                             absl::MakeSpan(want_tails), kSlots,
                                             absl::MakeSpan(want))
                  .ok());
  for (const ThreadOrder order : kThreadOrders) {
    SetThreadOrder(order);
    std::vector<float> got_tails = tails, got(want.size(), NAN);
    ASSERT_EQ(launch::ConvStepSlots(x.data(), rows, channels, stride, w.data(),
                                    static_cast<int>(kernel), got_tails.data(),
                                    kSlots.data(), got.data(), nullptr),
              cudaSuccess);
    TWICE_EXPECT_REPLAY_REL(got, want, kF32Tolerance);
    EXPECT_EQ(got_tails, want_tails);
  }
}

TEST(SlotStepsReplayTest, SsdStepMatchesCpu) {
  for (const kernels::SsdShape shape :
       {kernels::SsdShape{4, 64, 2, 32}, kernels::SsdShape{3, 48, 3, 80},
        kernels::SsdShape{2, 24, 1, 128}}) {
    SCOPED_TRACE(::testing::Message()
                 << "P=" << shape.head_dim << " N=" << shape.state);
    const int64_t rows = static_cast<int64_t>(kSlots.size());
    const int64_t hp = shape.heads * shape.head_dim;
    const int64_t gn = shape.groups * shape.state;
    const int64_t stride = hp + 2 * gn;
    const std::vector<float> xbc = Random(rows * stride, 10);
    std::vector<float> dt = Random(rows * shape.heads, 11);
    for (float& v : dt) v = std::log1p(std::exp(v)) * 0.2f;
    std::vector<float> a = Random(shape.heads, 12);
    for (float& v : a) v = -std::exp(v);
    const std::vector<float> d = Random(shape.heads, 13);
    const std::vector<float> states =
        Random(kCapacity * hp * shape.state, 14, 0.5f);
    const absl::Span<const float> h(xbc);
    std::vector<float> want_states = states, want(rows * hp);
    ASSERT_TRUE(kernels::SsdStepSlots(shape, h, stride, h.subspan(hp),
                                      h.subspan(hp + gn), stride, dt, a, d,
                                      absl::MakeSpan(want_states), kSlots,
                                      absl::MakeSpan(want))
                    .ok());
    for (const ThreadOrder order : kThreadOrders) {
      SetThreadOrder(order);
      std::vector<float> got_states = states, got(want.size(), NAN);
      launch::SsdArgs args;
      args.heads = static_cast<int>(shape.heads);
      args.head_dim = static_cast<int>(shape.head_dim);
      args.groups = static_cast<int>(shape.groups);
      args.state = static_cast<int>(shape.state);
      args.x = xbc.data();
      args.x_stride = stride;
      args.b = xbc.data() + hp;
      args.c = xbc.data() + hp + gn;
      args.bc_stride = stride;
      args.dt = dt.data();
      args.a = a.data();
      args.d = d.data();
      args.ssm_state = got_states.data();
      args.y = got.data();
      ASSERT_EQ(launch::SsdStepSlots(args, rows, kSlots.data(), nullptr),
                cudaSuccess);
      TWICE_EXPECT_REPLAY_REL(got, want, kF32Tolerance);
      TWICE_EXPECT_REPLAY_REL(got_states, want_states, kF32Tolerance);
    }
  }
}

TEST(SlotStepsReplayTest, WindowAttentionStepMatchesCpu) {
  const int64_t heads = 3, window = 9;
  for (const int64_t hd : {16, 64, 128}) {
    SCOPED_TRACE(::testing::Message() << "hd=" << hd);
    const int64_t rows = static_cast<int64_t>(kSlots.size());
    const int64_t row = heads * hd;
    const int64_t stride = 3 * row + 2;
    // Before the ring is full, at its wrap, far past it.
    const std::vector<int64_t> positions = {0, 4, window, 40};
    const std::vector<float> qkv = Random(rows * stride, 20);
    const std::vector<float> ring_k = Random(kCapacity * window * row, 21);
    const std::vector<float> ring_v = Random(kCapacity * window * row, 22);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    std::vector<float> want_k = ring_k, want_v = ring_v, want(rows * row);
    ASSERT_TRUE(kernels::WindowAttentionStepSlots(
                    qkv, stride, {heads, hd, window}, 10000.0f, scale,
                    positions, absl::MakeSpan(want_k), absl::MakeSpan(want_v),
                    kSlots, absl::MakeSpan(want))
                    .ok());
    for (const ThreadOrder order : kThreadOrders) {
      SetThreadOrder(order);
      std::vector<float> got_k = ring_k, got_v = ring_v, got(want.size(), NAN);
      launch::WindowStepArgs args;
      args.qkv = qkv.data();
      args.qkv_stride = stride;
      args.positions = positions.data();
      args.slots = kSlots.data();
      args.rows = rows;
      args.heads = static_cast<int>(heads);
      args.head_dim = static_cast<int>(hd);
      args.window = window;
      args.rotary_base = 10000.0f;
      args.scale = scale;
      args.ring_k = got_k.data();
      args.ring_v = got_v.data();
      args.y = got.data();
      ASSERT_EQ(launch::WindowAttentionStepSlots(args, nullptr), cudaSuccess);
      TWICE_EXPECT_REPLAY_REL(got, want, kF32Tolerance);
      TWICE_EXPECT_REPLAY_REL(got_k, want_k, kF32Tolerance);
      TWICE_EXPECT_REPLAY_REL(got_v, want_v, kF32Tolerance);
    }
  }
}

}  // namespace
}  // namespace twice::cuda_replay
