// The CUDA attention kernels' source replayed on the CPU (cuda_replay.h)
// against their CPU twins, in both thread orders: the tiled window and
// causal kernels (softmax_tiles_cuda.cu) and the warp-per-row kernel they
// fall back to (sequence_cuda.cu).
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/attention_decode.h"
#include "kernels/cuda/launch.h"
#include "kernels/window_attention.h"
#include "tests/cuda_replay/replay_test_util.h"

namespace twice::cuda_replay {
namespace {

using kernels::cuda::launch::SoftmaxAttentionArgs;
using testing::kF32Tolerance;
using testing::kThreadOrders;
using testing::Random;

struct AttentionShape {
  int64_t tokens, past, heads, kv_heads, head_dim, window;
  float scale;
};

SoftmaxAttentionArgs Args(const std::vector<float>& q, int64_t q_stride,
                          const std::vector<float>& k,
                          const std::vector<float>& v,
                          const AttentionShape& s) {
  SoftmaxAttentionArgs args;
  args.q = q.data();
  args.q_stride = q_stride;
  args.k = k.data();
  args.v = v.data();
  args.tokens = s.tokens;
  args.past = s.past;
  args.heads = static_cast<int>(s.heads);
  args.kv_heads = static_cast<int>(s.kv_heads);
  args.head_dim = static_cast<int>(s.head_dim);
  args.window = s.window;
  args.scale = s.scale;
  return args;
}

// out [T, H, hd] of launch::SoftmaxAttention on host memory.
std::vector<float> Replayed(SoftmaxAttentionArgs args, ThreadOrder order) {
  std::vector<float> out(args.tokens * args.heads * args.head_dim, NAN);
  args.out = out.data();
  SetThreadOrder(order);
  const int64_t launches = Launches();
  EXPECT_EQ(kernels::cuda::launch::SoftmaxAttention(args, nullptr),
            cudaSuccess);
  EXPECT_EQ(Launches(), launches + 1);
  return out;
}

TEST(AttentionReplayTest, WindowAttentionMatchesCpu) {
  const int64_t heads = 3;
  // Passes of 16 rows or more run the tiles (kSoftmaxTileMinRows): windows
  // inside one tile of keys and across several, tiles a row skips; fewer
  // rows run a warp per row.
  for (int64_t hd : {16, 48, 64, 128}) {
    for (const auto& [past, tokens, window] :
         {std::tuple<int64_t, int64_t, int64_t>{0, 40, 16},
          {20, 7, 8},
          {0, 17, 0},
          {40, 35, 70}}) {
      SCOPED_TRACE(::testing::Message() << "hd=" << hd << " P=" << past
                                        << " T=" << tokens << " w=" << window);
      const AttentionShape shape{tokens,
                                 past,
                                 heads,
                                 heads,
                                 hd,
                                 window,
                                 1.0f / std::sqrt(static_cast<float>(hd))};
      const int64_t row = heads * hd;
      const int64_t q_stride = row + 8;
      const std::vector<float> q = Random(tokens * q_stride, 90);
      const std::vector<float> k = Random((past + tokens) * row, 91);
      const std::vector<float> v = Random((past + tokens) * row, 92);
      std::vector<float> want(tokens * row);
      ASSERT_TRUE(kernels::WindowAttention(q, q_stride, k, v,
                                           {tokens, past, heads, hd, window},
                                           shape.scale, absl::MakeSpan(want))
                      .ok());
      for (const ThreadOrder order : kThreadOrders) {
        TWICE_EXPECT_REPLAY_REL(Replayed(Args(q, q_stride, k, v, shape), order),
                                want, kF32Tolerance);
      }
    }
  }
}

TEST(AttentionReplayTest, CausalGqaAttentionMatchesCpu) {
  const int64_t heads = 4, kv_heads = 2;
  for (const auto& [hd, past, tokens] :
       {std::tuple<int64_t, int64_t, int64_t>{64, 0, 40},
        {64, 17, 9},
        {48, 30, 33},
        {128, 0, 16}}) {
    SCOPED_TRACE(::testing::Message()
                 << "hd=" << hd << " P=" << past << " T=" << tokens);
    const AttentionShape shape{tokens, past, heads, kv_heads, hd, -1, 0.125f};
    const int64_t row = heads * hd;
    const int64_t kv_row = kv_heads * hd;
    const std::vector<float> q = Random(tokens * row, 93);
    const std::vector<float> k = Random((past + tokens) * kv_row, 94);
    const std::vector<float> v = Random((past + tokens) * kv_row, 95);
    std::vector<float> want(tokens * row);
    ASSERT_TRUE(kernels::CausalGqaAttention(q, row, k, v,
                                            {tokens, past, heads, kv_heads, hd},
                                            shape.scale, absl::MakeSpan(want))
                    .ok());
    for (const ThreadOrder order : kThreadOrders) {
      TWICE_EXPECT_REPLAY_REL(Replayed(Args(q, row, k, v, shape), order), want,
                              kF32Tolerance);
    }
  }
}

}  // namespace
}  // namespace twice::cuda_replay
