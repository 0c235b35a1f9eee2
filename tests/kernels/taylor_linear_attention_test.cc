// TaylorLinearAttention (raw q/k -> feature map -> prefix linear attention)
// against a float64 evaluation written from the equations alone: Taylor
// features phi(x) = [1, x / F^(1/4), x_m x_n / (sqrt 2 sqrt F)] computed in
// double, the carried state, the encoder folded into every query, the
// causal sums per query. Covers a decode step (T = 1), causal reads,
// encoder + causal, encoder only, F = 4 and 16, and bad sizes.
// Tolerance: 1e-5 absolute + 1e-4 relative.
#include "kernels/taylor_linear_attention.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels {
namespace {

using testing::ExpectClose;
using testing::RandomVector;

constexpr float kTaylorEps = 1e-6f;

struct TaylorShape {
  int heads, head_dim, feature_dim;
  int width() const { return 1 + feature_dim + feature_dim * feature_dim; }
};

std::vector<double> TaylorPhi(const float* x, int f) {
  std::vector<double> phi = {1.0};
  const double lin = 1.0 / std::pow(static_cast<double>(f), 0.25);
  const double quad =
      1.0 / (std::sqrt(2.0) * std::sqrt(static_cast<double>(f)));
  for (int m = 0; m < f; ++m) phi.push_back(x[m] * lin);
  for (int m = 0; m < f; ++m) {
    for (int n = 0; n < f; ++n) phi.push_back(double{x[m]} * x[n] * quad);
  }
  return phi;
}

// Adds rows [0, rows) of keys/values into S [H, hd, D] and z [H, D].
void TaylorAccumulate(const TaylorShape& s, const std::vector<float>& k,
                      const std::vector<float>& v, int rows,
                      std::vector<double>& kv, std::vector<double>& z) {
  const int w = s.width();
  for (int t = 0; t < rows; ++t) {
    for (int h = 0; h < s.heads; ++h) {
      const std::vector<double> pk =
          TaylorPhi(&k[(t * s.heads + h) * s.feature_dim], s.feature_dim);
      for (int m = 0; m < w; ++m) z[h * w + m] += pk[m];
      for (int e = 0; e < s.head_dim; ++e) {
        const double ve = v[(t * s.heads + h) * s.head_dim + e];
        for (int m = 0; m < w; ++m) {
          kv[(h * s.head_dim + e) * w + m] += ve * pk[m];
        }
      }
    }
  }
}

struct TaylorCase {
  TaylorShape shape;
  int tokens, encoder, past;
};

class TaylorLinearAttentionTest : public ::testing::TestWithParam<TaylorCase> {
};

TEST_P(TaylorLinearAttentionTest, MatchesFloat64Equations) {
  const TaylorCase c = GetParam();
  const TaylorShape s = c.shape;
  const int hf = s.heads * s.feature_dim, hv = s.heads * s.head_dim;
  const int w = s.width();
  const auto q = RandomVector(c.tokens * hf, 1, 0.8f);
  const auto k = RandomVector(c.tokens * hf, 2, 0.8f);
  const auto v = RandomVector(c.tokens * hv, 3);
  const auto ke = RandomVector(c.encoder * hf, 4, 0.8f);
  const auto ve = RandomVector(c.encoder * hv, 5);
  // The carried state: `past` earlier tokens.
  std::vector<double> kv(hv * w, 0.0), z(s.heads * w, 0.0);
  TaylorAccumulate(s, RandomVector(c.past * hf, 6, 0.8f),
                   RandomVector(c.past * hv, 7), c.past, kv, z);
  std::vector<float> kv_state(kv.begin(), kv.end());
  std::vector<float> k_state(z.begin(), z.end());
  // The state the op starts from is exactly these floats.
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = kv_state[i];
  for (size_t i = 0; i < z.size(); ++i) z[i] = k_state[i];

  TaylorAccumulate(s, ke, ve, c.encoder, kv,
                   z);  // every query sees the encoder
  std::vector<double> want(c.tokens * hv);
  for (int t = 0; t < c.tokens; ++t) {
    TaylorAccumulate(
        s, std::vector<float>(k.begin() + t * hf, k.begin() + (t + 1) * hf),
        std::vector<float>(v.begin() + t * hv, v.begin() + (t + 1) * hv), 1, kv,
        z);
    for (int h = 0; h < s.heads; ++h) {
      const std::vector<double> pq =
          TaylorPhi(&q[(t * s.heads + h) * s.feature_dim], s.feature_dim);
      double den = 0.0;
      for (int m = 0; m < w; ++m) den += pq[m] * z[h * w + m];
      for (int e = 0; e < s.head_dim; ++e) {
        double num = 0.0;
        for (int m = 0; m < w; ++m) {
          num += pq[m] * kv[(h * s.head_dim + e) * w + m];
        }
        want[(t * s.heads + h) * s.head_dim + e] = num / (den + kTaylorEps);
      }
    }
  }

  std::vector<float> y(c.tokens * hv);
  ASSERT_OK(TaylorLinearAttention(q, k, v, c.tokens, ke, ve, c.encoder,
                                  {s.heads, s.head_dim, s.feature_dim},
                                  kTaylorEps, absl::MakeSpan(kv_state),
                                  absl::MakeSpan(k_state), absl::MakeSpan(y)));
  ExpectClose(y, want, 1e-5, 1e-4, "y");
  ExpectClose(kv_state, kv, 1e-4, 1e-4, "kv_state");
  ExpectClose(k_state, z, 1e-4, 1e-4, "k_state");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TaylorLinearAttentionTest,
    ::testing::Values(TaylorCase{{2, 8, 16}, 1, 0, 5},   // a decode step
                      TaylorCase{{2, 8, 16}, 70, 0, 9},  // causal, past a chunk
                      TaylorCase{{3, 64, 16}, 33, 20, 4},  // encoder + causal
                      TaylorCase{{2, 8, 4}, 0, 17, 3},     // encoder only
                      TaylorCase{{1, 5, 4}, 130, 7, 0}));

TEST(TaylorLinearAttentionTest, BadSizesAreInvalid) {
  const TaylorAttentionDims dims{2, 8, 4};  // D = 21
  std::vector<float> q(2 * 8), k(2 * 8), v(2 * 16), y(2 * 16);
  std::vector<float> kv(16 * 21), z(2 * 21);
  EXPECT_OK(TaylorLinearAttention(q, k, v, 2, {}, {}, 0, dims, kTaylorEps,
                                  absl::MakeSpan(kv), absl::MakeSpan(z),
                                  absl::MakeSpan(y)));
  EXPECT_EQ(TaylorLinearAttention(q, k, v, 3, {}, {}, 0, dims, kTaylorEps,
                                  absl::MakeSpan(kv), absl::MakeSpan(z),
                                  absl::MakeSpan(y))
                .code(),
            absl::StatusCode::kInvalidArgument);  // q too short for T = 3
  EXPECT_EQ(TaylorLinearAttention({}, {}, {}, 0, {}, {}, 0, dims, kTaylorEps,
                                  absl::MakeSpan(kv), absl::MakeSpan(z), {})
                .code(),
            absl::StatusCode::kInvalidArgument);  // nothing to read
  std::vector<float> short_z(21);
  EXPECT_EQ(TaylorLinearAttention(q, k, v, 2, {}, {}, 0, dims, kTaylorEps,
                                  absl::MakeSpan(kv), absl::MakeSpan(short_z),
                                  absl::MakeSpan(y))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::kernels
