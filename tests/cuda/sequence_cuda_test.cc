// Sequence-mixer CUDA kernels against their CPU twins (f32, 1e-5; the bf16
// flash attention baseline at 1e-2): causal convolution with a carried
// tail, sliding-window and causal GQA softmax attention, RAT inter-chunk
// attention, the Mamba-2 SSD scan with an initial state.
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention_decode.h"
#include "kernels/causal_conv1d.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/ssd_args.h"
#include "kernels/rat_chunk_attention.h"
#include "kernels/ssd_chunk_scan.h"
#include "kernels/window_attention.h"
#include "tests/cuda/cuda_test_util.h"

namespace twice::kernels::cuda {
namespace {

using testing::CudaTest;
using testing::kBf16Tolerance;
using testing::kF32Tolerance;
using testing::kTf32Tolerance;
using testing::Random;
using testing::RoundBf16;

using SequenceCudaTest = CudaTest;

TEST_F(SequenceCudaTest, CausalConv1dMatchesCpuAcrossCalls) {
  const int64_t channels = 96;
  const int64_t stride = 130;  // x is a column range of a wider matrix
  for (int64_t kernel : {1, 3, 4}) {
    const std::vector<float> w = Random(channels * kernel, 60 + kernel);
    std::vector<float> tail = Random((kernel - 1) * channels, 70);
    DeviceBuffer dw = Put(w);
    DeviceBuffer dtail = Put(tail);
    for (int64_t tokens : {1, 2, 37}) {
      const std::vector<float> x = Random(tokens * stride, 80 + tokens);
      std::vector<float> want(tokens * channels);
      ASSERT_TRUE(kernels::CausalConv1d(x, tokens, channels, stride, w, kernel,
                                        absl::MakeSpan(tail),
                                        absl::MakeSpan(want))
                      .ok());
      DeviceBuffer dx = Put(x);
      DeviceBuffer dout = Zeros<float>(tokens * channels);
      ASSERT_TRUE(CausalConv1d(*stream_, dx.span<float>(), tokens, channels,
                               stride, dw.span<float>(), kernel,
                               dtail.span<float>(), dout.span<float>())
                      .ok());
      TWICE_EXPECT_REL(Get<float>(dout), want, kF32Tolerance);
      TWICE_EXPECT_REL(Get<float>(dtail), tail, kF32Tolerance);
    }
  }
}

TEST_F(SequenceCudaTest, WindowAttentionMatchesCpu) {
  const int64_t heads = 3;
  // Multiples of 32 and head dims that leave lanes idle (16, 48). Passes
  // of 16 rows or more stage their keys in shared tiles of 32 (launch.h
  // kSoftmaxTileMinRows): windows inside one tile and across several, with
  // tiles a row skips.
  for (int64_t hd : {16, 32, 48, 64, 128}) {
    for (const auto& [past, tokens, window] :
         {std::tuple<int64_t, int64_t, int64_t>{0, 50, 16},
          {20, 7, 8},
          {5, 1, 64},
          {0, 33, 0},
          {40, 100, 70}}) {
      SCOPED_TRACE(::testing::Message() << "hd=" << hd << " P=" << past
                                        << " T=" << tokens << " w=" << window);
      const int64_t row = heads * hd;
      const int64_t q_stride = row + 8;
      const std::vector<float> q = Random(tokens * q_stride, 90);
      const std::vector<float> k = Random((past + tokens) * row, 91);
      const std::vector<float> v = Random((past + tokens) * row, 92);
      const WindowAttentionDims dims{tokens, past, heads, hd, window};
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      std::vector<float> want(tokens * row);
      ASSERT_TRUE(kernels::WindowAttention(q, q_stride, k, v, dims, scale,
                                           absl::MakeSpan(want))
                      .ok());
      DeviceBuffer dq = Put(q), dk = Put(k), dv = Put(v);
      DeviceBuffer dout = Zeros<float>(tokens * row);
      ASSERT_TRUE(WindowAttention(*stream_, dq.span<float>(), q_stride,
                                  dk.span<float>(), dv.span<float>(), dims,
                                  scale, dout.span<float>())
                      .ok());
      TWICE_EXPECT_REL(Get<float>(dout), want, kF32Tolerance);
    }
  }
}

TEST_F(SequenceCudaTest, CausalGqaAttentionMatchesCpu) {
  const int64_t heads = 8, kv_heads = 2;
  for (const auto& [hd, past, tokens] :
       {std::tuple<int64_t, int64_t, int64_t>{64, 0, 40},
        {64, 100, 1},
        {64, 17, 9},
        {48, 17, 9},
        {16, 100, 1},
        {64, 30, 70},
        {128, 0, 16},
        {48, 5, 40}}) {
    SCOPED_TRACE(::testing::Message()
                 << "hd=" << hd << " P=" << past << " T=" << tokens);
    const int64_t row = heads * hd;
    const int64_t kv_row = kv_heads * hd;
    const std::vector<float> q = Random(tokens * row, 93);
    const std::vector<float> k = Random((past + tokens) * kv_row, 94);
    const std::vector<float> v = Random((past + tokens) * kv_row, 95);
    const CausalAttentionDims dims{tokens, past, heads, kv_heads, hd};
    std::vector<float> want(tokens * row);
    ASSERT_TRUE(kernels::CausalGqaAttention(q, row, k, v, dims, 0.125f,
                                            absl::MakeSpan(want))
                    .ok());
    DeviceBuffer dq = Put(q), dk = Put(k), dv = Put(v);
    DeviceBuffer dout = Zeros<float>(tokens * row);
    ASSERT_TRUE(CausalGqaAttention(*stream_, dq.span<float>(), row,
                                   dk.span<float>(), dv.span<float>(), dims,
                                   0.125f, dout.span<float>())
                    .ok());
    TWICE_EXPECT_REL(Get<float>(dout), want, kF32Tolerance);
  }
}

TEST_F(SequenceCudaTest, RatChunkAttentionMatchesCpu) {
  const int64_t tokens = 45, chunks = 6, heads = 2, hd = 64;
  const int64_t row = heads * hd;
  // q, own k, own v side by side in one [T, 3·row] matrix; chunk k and v
  // side by side in [C, 2·row].
  const std::vector<float> qkv = Random(tokens * 3 * row, 96);
  const std::vector<float> ckv = Random(chunks * 2 * row, 97);
  std::vector<int64_t> visible(tokens);
  for (int64_t t = 0; t < tokens; ++t) visible[t] = std::min(chunks, t / 8);
  visible[3] = chunks;  // any count in [0, C] is legal
  const RatAttentionDims dims{tokens, chunks, heads, hd};
  std::vector<float> want(tokens * row);
  const absl::Span<const float> h_qkv(qkv);
  const absl::Span<const float> h_ckv(ckv);
  ASSERT_TRUE(kernels::RatChunkAttention(
                  {h_qkv, 3 * row}, {h_qkv.subspan(row), 3 * row},
                  {h_qkv.subspan(2 * row), 3 * row}, {h_ckv, 2 * row},
                  {h_ckv.subspan(row), 2 * row}, visible, dims, 0.125f,
                  absl::MakeSpan(want))
                  .ok());
  DeviceBuffer dqkv = Put(qkv), dckv = Put(ckv);
  DeviceBuffer dout = Zeros<float>(tokens * row);
  const DeviceSpan<const float> d_qkv = dqkv.span<float>();
  const DeviceSpan<const float> d_ckv = dckv.span<float>();
  auto tail = [](DeviceSpan<const float> s, int64_t off) {
    return s.subspan(off, s.size - off);
  };
  ASSERT_TRUE(RatChunkAttention(*stream_, *allocator_, {d_qkv, 3 * row},
                                {tail(d_qkv, row), 3 * row},
                                {tail(d_qkv, 2 * row), 3 * row},
                                {d_ckv, 2 * row}, {tail(d_ckv, row), 2 * row},
                                visible, dims, 0.125f, dout.span<float>())
                  .ok());
  TWICE_EXPECT_REL(Get<float>(dout), want, kF32Tolerance);
  visible[0] = chunks + 1;
  EXPECT_EQ(RatChunkAttention(*stream_, *allocator_, {d_qkv, 3 * row},
                              {tail(d_qkv, row), 3 * row},
                              {tail(d_qkv, 2 * row), 3 * row}, {d_ckv, 2 * row},
                              {tail(d_ckv, row), 2 * row}, visible, dims,
                              0.125f, dout.span<float>())
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// Short reads run the recurrent kernel, long ones the chunked form
// (cuda_ops.h kSsdChunkedMinTokens), on the tensor cores (TF32) and on the
// CUDA cores (f32): chunks shorter and longer than the kernels' tiles of
// 32 positions and 64 rows, a short last chunk, and T = 32k. A shape the
// tensor cores do not take (P, N not multiples of 16) runs f32 either way.
TEST_F(SequenceCudaTest, SsdScanMatchesCpuWithInitialState) {
  const SsdShape shapes[] = {
      {8, 64, 2, 128},   // H, P, G, N (Mamba-2 shapes)
      {4, 128, 1, 16},   // the largest P, the smallest N of the tensor cores
      {3, 48, 3, 80},    // every head its own group, no power of two
      {2, 128, 1, 128},  // the largest tiles: 8 per warp, 77 KiB of shared
      {2, 24, 1, 40},    // not for the tensor cores
  };
  const std::pair<int64_t, int64_t> reads[] = {
      {70, 32},    {1, 32},    {63, 32},   {129, 32},   {200, 16},
      {1000, 256}, {4099, 64}, {300, 208}, {32768, 256}};
  for (const SsdShape& shape : shapes) {
    const int64_t hp = shape.heads * shape.head_dim;
    const int64_t gn = shape.groups * shape.state;
    const int64_t stride = hp + 2 * gn;  // x, B, C side by side as in xBC
    const bool tensor_core_shape =
        shape.head_dim % 16 == 0 && shape.state % 16 == 0;
    std::vector<float> a = Random(shape.heads, 110);
    for (float& x : a) x = -std::exp(x);
    const std::vector<float> d = Random(shape.heads, 111);
    DeviceBuffer da = Put(a), dd = Put(d);
    for (const auto& [tokens, chunk] : reads) {
      if (shape.heads != 8 && tokens == 32768) continue;  // one long read
      const std::vector<float> initial = Random(hp * shape.state, 112, 0.5f);
      const std::vector<float> xbc = Random(tokens * stride, 113 + tokens);
      std::vector<float> dt = Random(tokens * shape.heads, 114 + tokens);
      for (float& x : dt) x = std::log1p(std::exp(x)) * 0.2f;  // softplus
      const absl::Span<const float> h(xbc);
      std::vector<float> want(tokens * hp), want_state = initial;
      ASSERT_TRUE(kernels::SsdChunkScan(
                      shape, tokens, chunk, h, stride, h.subspan(hp),
                      h.subspan(hp + gn), stride, dt, a, d,
                      absl::MakeSpan(want_state), absl::MakeSpan(want))
                      .ok());
      DeviceBuffer dx = Put(xbc), ddt = Put(dt);
      const DeviceSpan<const float> dxs = dx.span<float>();
      for (const SsdMath math : {SsdMath::kTensorCores, SsdMath::kF32}) {
        const bool tf32 = math == SsdMath::kTensorCores && tensor_core_shape &&
                          tokens >= kSsdChunkedMinTokens;
        SCOPED_TRACE(::testing::Message()
                     << "H=" << shape.heads << " P=" << shape.head_dim
                     << " N=" << shape.state << " T=" << tokens << " chunk "
                     << chunk << (tf32 ? " tensor cores" : " f32"));
        DeviceBuffer dstate = Put(initial);
        DeviceBuffer dy = Zeros<float>(tokens * hp);
        ASSERT_TRUE(SsdChunkScan(*stream_, *allocator_, shape, tokens, chunk,
                                 dxs, stride, dxs.subspan(hp, dxs.size - hp),
                                 dxs.subspan(hp + gn, dxs.size - hp - gn),
                                 stride, ddt.span<float>(), da.span<float>(),
                                 dd.span<float>(), dstate.span<float>(),
                                 dy.span<float>(), math)
                        .ok());
        const double tolerance = tf32 ? kTf32Tolerance : kF32Tolerance;
        const std::vector<float> y = Get<float>(dy);
        TWICE_EXPECT_REL(y, want, tolerance);
        TWICE_EXPECT_REL(Get<float>(dstate), want_state, tolerance);
        if (tf32) {
          // The tensor cores ran: TF32 inputs move random values by ~1e-4,
          // where the f32 path stays within its 1e-5.
          EXPECT_GT(testing::RelativeError(y, want), kF32Tolerance);
        }
      }
    }
  }
}

// A read of more chunks than one pass takes (SsdChunkScan sizes its passes
// by a 256 MiB workspace, more chunks than the test above reads): passes
// of 3 chunks, each starting from the state the previous one left, on the
// tensor cores and on the CUDA cores.
TEST_F(SequenceCudaTest, SsdChunkedPassesContinueEachOther) {
  const SsdShape shape{4, 64, 2, 32};
  const int64_t tokens = 700, chunk = 64, per_pass = 3;
  const int64_t hp = shape.heads * shape.head_dim;
  const int64_t gn = shape.groups * shape.state;
  const int64_t stride = hp + 2 * gn;
  std::vector<float> a = Random(shape.heads, 130);
  for (float& x : a) x = -std::exp(x);
  const std::vector<float> d = Random(shape.heads, 131);
  const std::vector<float> initial = Random(hp * shape.state, 132, 0.5f);
  const std::vector<float> xbc = Random(tokens * stride, 133);
  std::vector<float> dt = Random(tokens * shape.heads, 134);
  for (float& x : dt) x = std::log1p(std::exp(x)) * 0.2f;
  const absl::Span<const float> h(xbc);
  std::vector<float> want(tokens * hp), want_state = initial;
  ASSERT_TRUE(kernels::SsdChunkScan(shape, tokens, chunk, h, stride,
                                    h.subspan(hp), h.subspan(hp + gn), stride,
                                    dt, a, d, absl::MakeSpan(want_state),
                                    absl::MakeSpan(want))
                  .ok());
  DeviceBuffer dx = Put(xbc), ddt = Put(dt), da = Put(a), dd = Put(d);
  for (const bool tensor_cores : {true, false}) {
    SCOPED_TRACE(tensor_cores ? "tensor cores" : "f32");
    DeviceBuffer dstate = Put(initial);
    DeviceBuffer dy = Zeros<float>(tokens * hp);
    DeviceBuffer workspace = Zeros<float>(per_pass * hp * shape.state);
    DeviceBuffer decay = Zeros<float>(per_pass * shape.heads);
    const DeviceSpan<const float> dxs = dx.span<float>();
    const launch::SsdArgs args =
        MakeSsdArgs(shape, tokens, dxs, stride, dxs.subspan(hp, dxs.size - hp),
                    dxs.subspan(hp + gn, dxs.size - hp - gn), stride,
                    ddt.span<float>(), da.span<float>(), dd.span<float>(),
                    dstate.span<float>(), dy.span<float>());
    ASSERT_EQ(launch::SsdChunkedScan(args, static_cast<int>(chunk), per_pass,
                                     static_cast<float*>(workspace.data()),
                                     static_cast<float*>(decay.data()),
                                     tensor_cores, stream_->get()),
              cudaSuccess);
    const double tolerance = tensor_cores ? kTf32Tolerance : kF32Tolerance;
    TWICE_EXPECT_REL(Get<float>(dy), want, tolerance);
    TWICE_EXPECT_REL(Get<float>(dstate), want_state, tolerance);
  }
}

TEST_F(SequenceCudaTest, FlashAttentionBf16MatchesCpu) {
  const int64_t batch = 2, heads = 3, hd = 64;
  for (int64_t tokens : {1, 64, 100, 257}) {
    SCOPED_TRACE(::testing::Message() << "T=" << tokens);
    const int64_t n = batch * tokens * heads * hd;
    const std::vector<float> q = RoundBf16(Random(n, 120));
    const std::vector<float> k = RoundBf16(Random(n, 121));
    const std::vector<float> v = RoundBf16(Random(n, 122));
    const float scale = 0.125f;
    std::vector<float> want(n);
    const CausalAttentionDims dims{tokens, 0, heads, heads, hd};
    const int64_t per = tokens * heads * hd;
    for (int64_t b = 0; b < batch; ++b) {
      ASSERT_TRUE(kernels::CausalGqaAttention(
                      absl::MakeConstSpan(q).subspan(b * per, per), heads * hd,
                      absl::MakeConstSpan(k).subspan(b * per, per),
                      absl::MakeConstSpan(v).subspan(b * per, per), dims, scale,
                      absl::MakeSpan(want).subspan(b * per, per))
                      .ok());
    }
    DeviceBuffer dq = PutBf16(q), dk = PutBf16(k), dv = PutBf16(v);
    DeviceBuffer dout = Zeros<Bf16>(n);
    ASSERT_TRUE(FlashAttentionBf16(*stream_, dq.span<Bf16>(), dk.span<Bf16>(),
                                   dv.span<Bf16>(), batch, tokens, heads, hd,
                                   scale, dout.span<Bf16>())
                    .ok());
    TWICE_EXPECT_REL(GetBf16(dout), want, kBf16Tolerance);
  }
}

}  // namespace
}  // namespace twice::kernels::cuda
