// The CUDA linear-attention kernels (Based, JRT-RNN) replayed on the CPU
// (cuda_replay.h) against their CPU twins, in both thread orders: the fused
// bf16 chunked prefill with and without the JRT encoder (based_cuda.cu),
// the featurized f32 prefill with its key sum (featurized_linear_attention.cu)
// and the decode step by rows (based_cuda.cu) and by slots
// (slot_steps_cuda.cu), each from a carried-in state.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/cuda/launch.h"
#include "kernels/linear_attention.h"
#include "kernels/prefix_linear_attention.h"
#include "kernels/taylor_feature_map.h"
#include "tests/cuda_replay/replay_test_util.h"
#include "tests/testing/carried_linear_attention_state.h"

namespace twice::cuda_replay {
namespace {

namespace launch = kernels::cuda::launch;
using kernels::LinearAttentionDims;
using kernels::TaylorFeatureDim;
using testing::kBf16Tolerance;
using testing::kF32Tolerance;
using testing::kThreadOrders;
using testing::Random;
using testing::RoundedToBf16;
using testing::ToBf16Bits;

constexpr float kEps = 1e-12f;

std::vector<float> Featurize(const std::vector<float>& raw, int64_t rows,
                             int64_t f) {
  std::vector<float> out(rows * TaylorFeatureDim(f));
  EXPECT_TRUE(
      kernels::TaylorFeatureMap(raw, rows, f, absl::MakeSpan(out)).ok());
  return out;
}

std::vector<float> RandomBf16(size_t n, uint32_t salt) {
  std::vector<float> v = Random(n, salt);
  for (float& x : v) x = RoundedToBf16(x);
  return v;
}

std::vector<uint16_t> Bits(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ToBf16Bits(v[i]);
  return out;
}

std::vector<float> FromBits(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    const uint32_t word = uint32_t{bits[i]} << 16;
    std::memcpy(&out[i], &word, 4);
  }
  return out;
}

// States of `batch` sequences, each as after reading some tokens.
void CarriedStates(int64_t batch, int64_t heads, int64_t hd, int64_t f,
                   uint32_t salt, std::vector<float>& kv,
                   std::vector<float>& z) {
  kv.clear();
  z.clear();
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<float> kv_b, z_b;
    ::twice::testing::CarriedLinearAttentionState(
        testing::TestSeed(), heads, hd, f, 9 + 5 * b, salt + 3 * b, kv_b, z_b);
    kv.insert(kv.end(), kv_b.begin(), kv_b.end());
    z.insert(z.end(), z_b.begin(), z_b.end());
  }
}

TEST(LinearAttentionReplayTest, FusedBf16PrefillMatchesCpu) {
  const int64_t f = launch::kTaylorF, d = TaylorFeatureDim(f), hd = 64;
  // (B, H, T, E): a ragged last chunk, the JRT encoder with tokens, the
  // encoder alone (the state merge), a single token.
  for (const auto& [batch, heads, tokens, enc] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 2, 70, 0},
        {1, 3, 33, 40},
        {2, 1, 0, 50},
        {1, 2, 1, 0}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << batch << " H=" << heads
                                      << " T=" << tokens << " E=" << enc);
    const std::vector<float> q = RandomBf16(batch * tokens * heads * f, 100);
    const std::vector<float> k = RandomBf16(batch * tokens * heads * f, 101);
    const std::vector<float> v = RandomBf16(batch * tokens * heads * hd, 102);
    const std::vector<float> ke = RandomBf16(batch * enc * heads * f, 103);
    const std::vector<float> ve = RandomBf16(batch * enc * heads * hd, 104);
    std::vector<float> kv, z;
    CarriedStates(batch, heads, hd, f, 105, kv, z);
    std::vector<float> want(batch * tokens * heads * hd), want_kv = kv,
                                                          want_z = z;
    for (int64_t b = 0; b < batch; ++b) {
      auto part = [b](const std::vector<float>& x, int64_t n) {
        return std::vector<float>(x.begin() + b * n, x.begin() + (b + 1) * n);
      };
      ASSERT_TRUE(kernels::PrefixLinearAttentionPrefill(
                      Featurize(part(q, tokens * heads * f), tokens * heads, f),
                      Featurize(part(k, tokens * heads * f), tokens * heads, f),
                      part(v, tokens * heads * hd), tokens,
                      Featurize(part(ke, enc * heads * f), enc * heads, f),
                      part(ve, enc * heads * hd), enc,
                      LinearAttentionDims{heads, hd, d}, kEps,
                      absl::MakeSpan(want_kv).subspan(b * heads * hd * d,
                                                      heads * hd * d),
                      absl::MakeSpan(want_z).subspan(b * heads * d, heads * d),
                      absl::MakeSpan(want).subspan(b * tokens * heads * hd,
                                                   tokens * heads * hd))
                      .ok());
    }
    const std::vector<uint16_t> bq = Bits(q), bk = Bits(k), bv = Bits(v),
                                bke = Bits(ke), bve = Bits(ve);
    for (const ThreadOrder order : kThreadOrders) {
      SetThreadOrder(order);
      std::vector<float> got_kv = kv, got_z = z;
      std::vector<uint16_t> y(want.size(), 0x7FC0);  // NaN
      launch::LinearAttentionArgs args;
      args.q = bq.data();
      args.k = bk.data();
      args.v = bv.data();
      args.k_enc = bke.data();
      args.v_enc = bve.data();
      args.batch = batch;
      args.tokens = tokens;
      args.encoder_tokens = enc;
      args.heads = static_cast<int>(heads);
      args.head_dim = static_cast<int>(hd);
      args.eps = kEps;
      args.kv_state = got_kv.data();
      args.k_state = got_z.data();
      args.y = y.data();
      ASSERT_EQ(launch::LinearAttentionPrefill(args, nullptr), cudaSuccess);
      TWICE_EXPECT_REPLAY_REL(FromBits(y), want, kBf16Tolerance);
      // The state is accumulated in f32 from bf16 features.
      TWICE_EXPECT_REPLAY_REL(got_kv, want_kv, kBf16Tolerance);
      TWICE_EXPECT_REPLAY_REL(got_z, want_z, kBf16Tolerance);
    }
  }
}

TEST(LinearAttentionReplayTest, FeaturizedPrefillMatchesCpu) {
  const int64_t hd = 40;
  for (const auto& [f, heads, tokens, enc] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{4, 2, 24, 0},
        {16, 1, 9, 0},
        {4, 2, 16, 12},
        {16, 1, 0, 6},
        {32, 1, 3, 2}}) {  // D = 1057: several feature columns a thread
    SCOPED_TRACE(::testing::Message() << "f=" << f << " H=" << heads
                                      << " T=" << tokens << " E=" << enc);
    const int64_t d = TaylorFeatureDim(f);
    const std::vector<float> pq =
        Featurize(Random(tokens * heads * f, 200), tokens * heads, f);
    const std::vector<float> pk =
        Featurize(Random(tokens * heads * f, 201), tokens * heads, f);
    const std::vector<float> v = Random(tokens * heads * hd, 202);
    const std::vector<float> pke =
        Featurize(Random(enc * heads * f, 203), enc * heads, f);
    const std::vector<float> ve = Random(enc * heads * hd, 204);
    std::vector<float> kv, z;
    CarriedStates(1, heads, hd, f, 205, kv, z);
    std::vector<float> want(tokens * heads * hd), want_kv = kv, want_z = z;
    ASSERT_TRUE(kernels::PrefixLinearAttentionPrefill(
                    pq, pk, v, tokens, pke, ve, enc, {heads, hd, d}, kEps,
                    absl::MakeSpan(want_kv), absl::MakeSpan(want_z),
                    absl::MakeSpan(want))
                    .ok());
    for (const ThreadOrder order : kThreadOrders) {
      SetThreadOrder(order);
      std::vector<float> got_kv = kv, got_z = z, y(want.size(), NAN);
      launch::FeaturizedLinearAttentionArgs args;
      args.phi_q = pq.data();
      args.phi_k = pk.data();
      args.v = v.data();
      args.phi_k_enc = pke.data();
      args.v_enc = ve.data();
      args.tokens = tokens;
      args.encoder_tokens = enc;
      args.heads = static_cast<int>(heads);
      args.head_dim = static_cast<int>(hd);
      args.feature_width = static_cast<int>(d);
      args.eps = kEps;
      args.kv_state = got_kv.data();
      args.k_state = got_z.data();
      args.y = y.data();
      ASSERT_EQ(launch::FeaturizedLinearAttention(args, nullptr), cudaSuccess);
      TWICE_EXPECT_REPLAY_REL(y, want, kF32Tolerance);
      TWICE_EXPECT_REPLAY_REL(got_kv, want_kv, kF32Tolerance);
      // Each call's keys are added to the running key sum once.
      TWICE_EXPECT_REPLAY_REL(got_z, want_z, kF32Tolerance);
    }
  }
}

TEST(LinearAttentionReplayTest, StepsMatchCpu) {
  const int64_t heads = 2, hd = 64, capacity = 6;
  for (const int64_t f : {4, 16}) {
    SCOPED_TRACE(::testing::Message() << "f=" << f);
    const int64_t d = TaylorFeatureDim(f);
    std::vector<float> kv, z;
    CarriedStates(capacity, heads, hd, f, 300, kv, z);
    const std::vector<int32_t> slots = {4, 0, 5};
    const int64_t rows = static_cast<int64_t>(slots.size());
    const std::vector<float> q = Random(rows * heads * f, 301);
    const std::vector<float> k = Random(rows * heads * f, 302);
    const std::vector<float> v = Random(rows * heads * hd, 303);
    const std::vector<float> pq = Featurize(q, rows * heads, f);
    const std::vector<float> pk = Featurize(k, rows * heads, f);
    std::vector<float> want(rows * heads * hd), want_kv = kv, want_z = z;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t s = slots[r];
      ASSERT_TRUE(
          kernels::LinearAttentionStep(
              absl::MakeConstSpan(pq).subspan(r * heads * d, heads * d),
              absl::MakeConstSpan(pk).subspan(r * heads * d, heads * d),
              absl::MakeConstSpan(v).subspan(r * heads * hd, heads * hd),
              {heads, hd, d}, kEps,
              absl::MakeSpan(want_kv).subspan(s * heads * hd * d,
                                              heads * hd * d),
              absl::MakeSpan(want_z).subspan(s * heads * d, heads * d),
              absl::MakeSpan(want).subspan(r * heads * hd, heads * hd))
              .ok());
    }
    for (const ThreadOrder order : kThreadOrders) {
      SetThreadOrder(order);
      // Without slots row r steps state r (the batched form of a step).
      std::vector<float> row_kv, row_z, row_want_kv, row_want_z;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t s = slots[r];
        const auto add = [&](const std::vector<float>& from, int64_t size,
                             std::vector<float>& to) {
          to.insert(to.end(), from.begin() + s * size,
                    from.begin() + (s + 1) * size);
        };
        add(kv, heads * hd * d, row_kv);
        add(z, heads * d, row_z);
        add(want_kv, heads * hd * d, row_want_kv);
        add(want_z, heads * d, row_want_z);
      }
      std::vector<float> row_y(want.size(), NAN);
      ASSERT_EQ(launch::LinearAttentionStep(
                    q.data(), k.data(), v.data(), rows, static_cast<int>(heads),
                    static_cast<int>(hd), static_cast<int>(f), kEps,
                    row_kv.data(), row_z.data(), row_y.data(), nullptr),
                cudaSuccess);
      TWICE_EXPECT_REPLAY_REL(row_y, want, kF32Tolerance);
      TWICE_EXPECT_REPLAY_REL(row_kv, row_want_kv, kF32Tolerance);
      TWICE_EXPECT_REPLAY_REL(row_z, row_want_z, kF32Tolerance);

      std::vector<float> got_kv = kv, got_z = z, y(want.size(), NAN);
      ASSERT_EQ(
          launch::LinearAttentionStepSlots(
              q.data(), k.data(), v.data(), rows, static_cast<int>(heads),
              static_cast<int>(hd), static_cast<int>(f), kEps, got_kv.data(),
              got_z.data(), slots.data(), y.data(), nullptr),
          cudaSuccess);
      TWICE_EXPECT_REPLAY_REL(y, want, kF32Tolerance);
      TWICE_EXPECT_REPLAY_REL(got_kv, want_kv, kF32Tolerance);
      TWICE_EXPECT_REPLAY_REL(got_z, want_z, kF32Tolerance);
    }
  }
}

}  // namespace
}  // namespace twice::cuda_replay
