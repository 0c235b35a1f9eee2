// Based / JRT-RNN CUDA kernels against their CPU twins: the feature map and
// recurrent step (f32, 1e-5) and the fused chunked prefill with and without
// the JRT encoder pass (bf16 in/out, 1e-2), including a carried-in state and
// state passing across calls.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/linear_attention.h"
#include "kernels/prefix_linear_attention.h"
#include "kernels/taylor_feature_map.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::cuda {
namespace {

using testing::CudaTest;
using testing::kBf16Tolerance;
using testing::kF32Tolerance;
using testing::Random;
using testing::RoundBf16;

constexpr int64_t kF = 16;
constexpr int64_t kD = TaylorFeatureDim(kF);
constexpr float kEps = 1e-12f;

using BasedCudaTest = CudaTest;

TEST_F(BasedCudaTest, TaylorFeatureMapMatchesCpu) {
  for (int64_t f : {1, 4, 16}) {
    const int64_t rows = 77;
    const std::vector<float> x = Random(rows * f, 10 + f);
    std::vector<float> want(rows * TaylorFeatureDim(f));
    ASSERT_TRUE(
        kernels::TaylorFeatureMap(x, rows, f, absl::MakeSpan(want)).ok());
    DeviceBuffer dx = Put(x);
    DeviceBuffer dout = Zeros<float>(rows * TaylorFeatureDim(f));
    ASSERT_TRUE(TaylorFeatureMap(*stream_, dx.span<float>(), rows, f,
                                 dout.span<float>())
                    .ok());
    TWICE_EXPECT_REL(Get<float>(dout), want, kF32Tolerance);
  }
}

std::vector<float> Featurize(const std::vector<float>& x, int64_t rows) {
  std::vector<float> out(rows * kD);
  EXPECT_OK(kernels::TaylorFeatureMap(x, rows, kF, absl::MakeSpan(out)));
  return out;
}

// Rows [t0, t0 + n) of sequence b of a [B, T, H, w] tensor.
std::vector<float> Slice(const std::vector<float>& x, int64_t b, int64_t seq,
                         int64_t t0, int64_t n, int64_t row) {
  const auto begin = x.begin() + (b * seq + t0) * row;
  return std::vector<float>(begin, begin + n * row);
}

TEST_F(BasedCudaTest, StepMatchesCpu) {
  const int64_t batch = 3;
  const int64_t heads = 4;
  const int64_t hd = 64;
  for (int64_t f : {4, 16}) {
    const int64_t d = TaylorFeatureDim(f);
    const FusedLinearAttentionDims dims{batch, heads, hd, f};
    // Carried states of B sequences, each made by reading earlier tokens
    // (so every denominator is a sum of positive kernel values).
    std::vector<float> kv, z;
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<float> kv_b, z_b;
      testing::CarriedLinearAttentionState(heads, hd, f, 11 + b, 20 + 3 * b,
                                           kv_b, z_b);
      kv.insert(kv.end(), kv_b.begin(), kv_b.end());
      z.insert(z.end(), z_b.begin(), z_b.end());
    }
    DeviceBuffer dkv = Put(kv);
    DeviceBuffer dz = Put(z);
    for (int step = 0; step < 3; ++step) {
      const std::vector<float> q = Random(batch * heads * f, 30 + step);
      const std::vector<float> k = Random(batch * heads * f, 40 + step);
      const std::vector<float> v = Random(batch * heads * hd, 50 + step);
      std::vector<float> want(batch * heads * hd);
      // Feature maps of all B·H rows at once, then per-sequence steps.
      std::vector<float> pq(batch * heads * d);
      std::vector<float> pk(batch * heads * d);
      ASSERT_TRUE(
          kernels::TaylorFeatureMap(q, batch * heads, f, absl::MakeSpan(pq))
              .ok());
      ASSERT_TRUE(
          kernels::TaylorFeatureMap(k, batch * heads, f, absl::MakeSpan(pk))
              .ok());
      const LinearAttentionDims cpu_dims{heads, hd, d};
      for (int64_t b = 0; b < batch; ++b) {
        ASSERT_TRUE(
            kernels::LinearAttentionStep(
                absl::MakeConstSpan(pq).subspan(b * heads * d, heads * d),
                absl::MakeConstSpan(pk).subspan(b * heads * d, heads * d),
                absl::MakeConstSpan(v).subspan(b * heads * hd, heads * hd),
                cpu_dims, kEps,
                absl::MakeSpan(kv).subspan(b * heads * hd * d, heads * hd * d),
                absl::MakeSpan(z).subspan(b * heads * d, heads * d),
                absl::MakeSpan(want).subspan(b * heads * hd, heads * hd))
                .ok());
      }
      DeviceBuffer dq = Put(q);
      DeviceBuffer dk = Put(k);
      DeviceBuffer dv = Put(v);
      DeviceBuffer dy = Zeros<float>(batch * heads * hd);
      ASSERT_TRUE(LinearAttentionStep(*stream_, dq.span<float>(),
                                      dk.span<float>(), dv.span<float>(), dims,
                                      kEps, dkv.span<float>(), dz.span<float>(),
                                      dy.span<float>())
                      .ok());
      TWICE_EXPECT_REL(Get<float>(dy), want, kF32Tolerance);
    }
    TWICE_EXPECT_REL(Get<float>(dkv), kv, kF32Tolerance);
    TWICE_EXPECT_REL(Get<float>(dz), z, kF32Tolerance);
  }
}

// Exposes the fixture's helpers to CheckPrefill.
class BasedPrefillTest : public CudaTest {
 public:
  using CudaTest::Get;
  using CudaTest::GetBf16;
  using CudaTest::Put;
  using CudaTest::PutBf16;
  using CudaTest::stream_;
  using CudaTest::Zeros;
};

// Runs the fused prefill (optionally with an encoder prefix) on the GPU and
// PrefixLinearAttentionPrefill on the CPU per sequence, from the same
// carried-in state; compares y and the final state.
void CheckPrefill(BasedPrefillTest& t, int64_t batch, int64_t heads,
                  int64_t tokens, int64_t enc_tokens, uint32_t salt) {
  SCOPED_TRACE(::testing::Message() << "B=" << batch << " H=" << heads
                                    << " T=" << tokens << " E=" << enc_tokens);
  const int64_t hd = 64;
  const std::vector<float> q =
      RoundBf16(Random(batch * tokens * heads * kF, salt));
  const std::vector<float> k =
      RoundBf16(Random(batch * tokens * heads * kF, salt + 1));
  const std::vector<float> v =
      RoundBf16(Random(batch * tokens * heads * hd, salt + 2));
  const std::vector<float> ke =
      RoundBf16(Random(batch * enc_tokens * heads * kF, salt + 3));
  const std::vector<float> ve =
      RoundBf16(Random(batch * enc_tokens * heads * hd, salt + 4));
  // A carried-in state per sequence, made by reading earlier tokens.
  std::vector<float> kv, z;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<float> kv_b, z_b;
    testing::CarriedLinearAttentionState(heads, hd, kF, 9 + 5 * b,
                                         salt + 5 + 3 * b, kv_b, z_b);
    kv.insert(kv.end(), kv_b.begin(), kv_b.end());
    z.insert(z.end(), z_b.begin(), z_b.end());
  }

  std::vector<float> want(batch * tokens * heads * hd);
  std::vector<float> kv_want = kv;
  std::vector<float> z_want = z;
  const LinearAttentionDims cpu_dims{heads, hd, kD};
  for (int64_t b = 0; b < batch; ++b) {
    const std::vector<float> pq =
        Featurize(Slice(q, b, tokens, 0, tokens, heads * kF), tokens * heads);
    const std::vector<float> pk =
        Featurize(Slice(k, b, tokens, 0, tokens, heads * kF), tokens * heads);
    const std::vector<float> pke =
        Featurize(Slice(ke, b, enc_tokens, 0, enc_tokens, heads * kF),
                  enc_tokens * heads);
    const std::vector<float> vb = Slice(v, b, tokens, 0, tokens, heads * hd);
    const std::vector<float> veb =
        Slice(ve, b, enc_tokens, 0, enc_tokens, heads * hd);
    ASSERT_TRUE(PrefixLinearAttentionPrefill(
                    pq, pk, vb, tokens, pke, veb, enc_tokens, cpu_dims, kEps,
                    absl::MakeSpan(kv_want).subspan(b * heads * hd * kD,
                                                    heads * hd * kD),
                    absl::MakeSpan(z_want).subspan(b * heads * kD, heads * kD),
                    absl::MakeSpan(want).subspan(b * tokens * heads * hd,
                                                 tokens * heads * hd))
                    .ok());
  }

  DeviceBuffer dq = t.PutBf16(q);
  DeviceBuffer dk = t.PutBf16(k);
  DeviceBuffer dv = t.PutBf16(v);
  DeviceBuffer dke = t.PutBf16(ke);
  DeviceBuffer dve = t.PutBf16(ve);
  DeviceBuffer dkv = t.Put(kv);
  DeviceBuffer dz = t.Put(z);
  DeviceBuffer dy = t.Zeros<Bf16>(batch * tokens * heads * hd);
  const FusedLinearAttentionDims dims{batch, heads, hd, kF};
  ASSERT_TRUE(PrefixLinearAttentionPrefillBf16(
                  *t.stream_, dq.span<Bf16>(), dk.span<Bf16>(), dv.span<Bf16>(),
                  tokens, dke.span<Bf16>(), dve.span<Bf16>(), enc_tokens, dims,
                  kEps, dkv.span<float>(), dz.span<float>(), dy.span<Bf16>())
                  .ok());
  TWICE_EXPECT_REL(t.GetBf16(dy), want, kBf16Tolerance);
  // The state is accumulated in f32 from bf16 features.
  TWICE_EXPECT_REL(t.Get<float>(dkv), kv_want, kBf16Tolerance);
  TWICE_EXPECT_REL(t.Get<float>(dz), z_want, kBf16Tolerance);
}

TEST_F(BasedPrefillTest, CausalPrefillMatchesCpu) {
  // Chunk-aligned, ragged last chunk, a single token, several heads.
  CheckPrefill(*this, 2, 3, 96, 0, 100);
  CheckPrefill(*this, 1, 2, 77, 0, 200);
  CheckPrefill(*this, 3, 1, 1, 0, 300);
  CheckPrefill(*this, 1, 16, 1024, 0, 400);
  // JRT Table 5's sequence length at the 360M shape's 16 heads.
  CheckPrefill(*this, 1, 16, 32768, 0, 800);
}

TEST_F(BasedPrefillTest, JrtEncoderAndMergeMatchCpu) {
  CheckPrefill(*this, 2, 2, 64, 40, 500);
  CheckPrefill(*this, 1, 3, 33, 100, 600);
  CheckPrefill(*this, 2, 1, 0, 50, 700);  // encoder only: state merge
  CheckPrefill(*this, 1, 16, 8192, 8192, 900);
}

TEST_F(BasedPrefillTest, StatePassingEqualsOneCall) {
  const int64_t batch = 2, heads = 2, hd = 64, tokens = 160, split = 70;
  const std::vector<float> q = Random(batch * tokens * heads * kF, 800);
  const std::vector<float> k = Random(batch * tokens * heads * kF, 801);
  const std::vector<float> v = Random(batch * tokens * heads * hd, 802);
  const FusedLinearAttentionDims dims{batch, heads, hd, kF};
  auto run = [&](int64_t t0, int64_t n, DeviceBuffer& kv, DeviceBuffer& z) {
    std::vector<float> qs, ks, vs;
    for (int64_t b = 0; b < batch; ++b) {
      auto a = Slice(q, b, tokens, t0, n, heads * kF);
      auto c = Slice(k, b, tokens, t0, n, heads * kF);
      auto e = Slice(v, b, tokens, t0, n, heads * hd);
      qs.insert(qs.end(), a.begin(), a.end());
      ks.insert(ks.end(), c.begin(), c.end());
      vs.insert(vs.end(), e.begin(), e.end());
    }
    DeviceBuffer dq = PutBf16(qs), dk = PutBf16(ks), dv = PutBf16(vs);
    DeviceBuffer dy = Zeros<Bf16>(batch * n * heads * hd);
    EXPECT_TRUE(LinearAttentionPrefillBf16(*stream_, dq.span<Bf16>(),
                                           dk.span<Bf16>(), dv.span<Bf16>(), n,
                                           dims, kEps, kv.span<float>(),
                                           z.span<float>(), dy.span<Bf16>())
                    .ok());
    return GetBf16(dy);
  };
  DeviceBuffer kv1 = Zeros<float>(batch * heads * hd * kD);
  DeviceBuffer z1 = Zeros<float>(batch * heads * kD);
  const std::vector<float> whole = run(0, tokens, kv1, z1);
  DeviceBuffer kv2 = Zeros<float>(batch * heads * hd * kD);
  DeviceBuffer z2 = Zeros<float>(batch * heads * kD);
  const std::vector<float> first = run(0, split, kv2, z2);
  const std::vector<float> second = run(split, tokens - split, kv2, z2);
  std::vector<float> joined;
  for (int64_t b = 0; b < batch; ++b) {
    auto a = Slice(first, b, split, 0, split, heads * hd);
    auto c = Slice(second, b, tokens - split, 0, tokens - split, heads * hd);
    joined.insert(joined.end(), a.begin(), a.end());
    joined.insert(joined.end(), c.begin(), c.end());
  }
  TWICE_EXPECT_REL(joined, whole, kBf16Tolerance);
  TWICE_EXPECT_REL(Get<float>(kv2), Get<float>(kv1), 1e-4);
}

TEST_F(BasedCudaTest, RejectsUnsupportedShapes) {
  DeviceBuffer buf = Zeros<Bf16>(64);
  DeviceBuffer st = Zeros<float>(64);
  const FusedLinearAttentionDims dims{1, 1, 32, kF};  // head_dim 32
  EXPECT_EQ(LinearAttentionPrefillBf16(*stream_, buf.span<Bf16>(),
                                       buf.span<Bf16>(), buf.span<Bf16>(), 1,
                                       dims, kEps, st.span<float>(),
                                       st.span<float>(), buf.span<Bf16>())
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::kernels::cuda
