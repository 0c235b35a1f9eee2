// The CUDA attention kernels' source replayed on the CPU (cuda_replay.h)
// against their CPU twins, in both thread orders: the tiled window and
// causal kernels (softmax_tiles_cuda.cu), the warp-per-row kernel they
// fall back to, RAT's chunk attention and the bf16 flash baseline on tensor
// cores (sequence_cuda.cu).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/attention_decode.h"
#include "kernels/cuda/launch.h"
#include "kernels/rat_chunk_attention.h"
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

TEST(AttentionReplayTest, RatChunkAttentionMatchesCpu) {
  const int64_t tokens = 45, chunks = 6, heads = 2, hd = 64;
  const int64_t row = heads * hd;
  // q, own k, own v side by side in one [T, 3·row] matrix; chunk k and v
  // side by side in [C, 2·row].
  const std::vector<float> qkv = Random(tokens * 3 * row, 96);
  const std::vector<float> ckv = Random(chunks * 2 * row, 97);
  std::vector<int64_t> visible(tokens);
  for (int64_t t = 0; t < tokens; ++t) visible[t] = std::min(chunks, t / 8);
  visible[3] = chunks;  // any count in [0, C] is legal
  std::vector<float> want(tokens * row);
  const absl::Span<const float> h_qkv(qkv);
  const absl::Span<const float> h_ckv(ckv);
  ASSERT_TRUE(kernels::RatChunkAttention(
                  {h_qkv, 3 * row}, {h_qkv.subspan(row), 3 * row},
                  {h_qkv.subspan(2 * row), 3 * row}, {h_ckv, 2 * row},
                  {h_ckv.subspan(row), 2 * row}, visible,
                  {tokens, chunks, heads, hd}, 0.125f, absl::MakeSpan(want))
                  .ok());
  kernels::cuda::launch::RatAttentionArgs args;
  args.q = qkv.data();
  args.q_stride = 3 * row;
  args.own_k = qkv.data() + row;
  args.own_k_stride = 3 * row;
  args.own_v = qkv.data() + 2 * row;
  args.own_v_stride = 3 * row;
  args.chunk_k = ckv.data();
  args.chunk_k_stride = 2 * row;
  args.chunk_v = ckv.data() + row;
  args.chunk_v_stride = 2 * row;
  args.visible = visible.data();
  args.tokens = tokens;
  args.heads = static_cast<int>(heads);
  args.head_dim = static_cast<int>(hd);
  args.scale = 0.125f;
  for (const ThreadOrder order : kThreadOrders) {
    SetThreadOrder(order);
    std::vector<float> got(tokens * row, NAN);
    args.out = got.data();
    ASSERT_EQ(kernels::cuda::launch::RatChunkAttention(args, nullptr),
              cudaSuccess);
    TWICE_EXPECT_REPLAY_REL(got, want, kF32Tolerance);
  }
}

TEST(AttentionReplayTest, FlashAttentionBf16MatchesCpu) {
  const int64_t batch = 2, heads = 2, hd = 64;
  for (const int64_t tokens : {1, 64, 100}) {
    SCOPED_TRACE(::testing::Message() << "T=" << tokens);
    const int64_t n = batch * tokens * heads * hd;
    std::vector<float> q = Random(n, 120), k = Random(n, 121),
                       v = Random(n, 122);
    std::vector<uint16_t> bq, bk, bv;
    for (auto* x : {&q, &k, &v}) {
      for (float& e : *x) e = testing::RoundedToBf16(e);
    }
    for (size_t i = 0; i < q.size(); ++i) {
      bq.push_back(testing::ToBf16Bits(q[i]));
      bk.push_back(testing::ToBf16Bits(k[i]));
      bv.push_back(testing::ToBf16Bits(v[i]));
    }
    std::vector<float> want(n);
    const int64_t per = tokens * heads * hd;
    for (int64_t b = 0; b < batch; ++b) {
      ASSERT_TRUE(kernels::CausalGqaAttention(
                      absl::MakeConstSpan(q).subspan(b * per, per), heads * hd,
                      absl::MakeConstSpan(k).subspan(b * per, per),
                      absl::MakeConstSpan(v).subspan(b * per, per),
                      {tokens, 0, heads, heads, hd}, 0.125f,
                      absl::MakeSpan(want).subspan(b * per, per))
                      .ok());
    }
    for (const ThreadOrder order : kThreadOrders) {
      SetThreadOrder(order);
      std::vector<uint16_t> out(n, 0x7FC0);
      ASSERT_EQ(kernels::cuda::launch::FlashAttentionBf16(
                    bq.data(), bk.data(), bv.data(), batch, tokens,
                    static_cast<int>(heads), 0.125f, out.data(), nullptr),
                cudaSuccess);
      std::vector<float> got(n);
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t word = uint32_t{out[i]} << 16;
        std::memcpy(&got[i], &word, 4);
      }
      TWICE_EXPECT_REPLAY_REL(got, want, testing::kBf16Tolerance);
    }
  }
}

}  // namespace
}  // namespace twice::cuda_replay
