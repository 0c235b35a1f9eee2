// PrefixLinearAttentionPrefill against a float64 evaluation of JRT eq. 3/4
// written out per query (no state, no chunks):
//   num_i = S_in q_i + sum_{j<=i} (q_i · k_j) v_j + sum_{j<E} (q_i · ke_j) ve_j
//   den_i = q_i · (z_in + sum_{j<=i} k_j + sum_{j<E} ke_j)
//   y_i = num_i / (den_i + eps);  S, z = S_in, z_in + encoder + decoder sums
// over token counts around the chunk (64), encoder sizes 0, 1, partial and
// longer than the call, with a carried-in state. Features are real Taylor
// features (F = 16, D = 273). Tolerance: 1e-5 absolute + 1e-4 relative.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/prefix_linear_attention.h"
#include "kernels/taylor_feature_map.h"
#include "tests/kernels/kernel_test_util.h"

namespace twice::kernels {
namespace {

using testing::ExpectClose;
using testing::RandomVector;

constexpr int kHeads = 2, kHd = 8, kF = 16;
constexpr int kD = 1 + kF + kF * kF;
constexpr float kEps = 1e-12f;

// Featurized [rows, H, D] from random raw [rows, H, F].
std::vector<float> Features(int rows, uint32_t seed) {
  const auto raw = RandomVector(rows * kHeads * kF, seed, 0.7f);
  std::vector<float> phi(rows * kHeads * kD);
  EXPECT_TRUE(
      TaylorFeatureMap(raw, rows * kHeads, kF, absl::MakeSpan(phi)).ok());
  return phi;
}

double Dot(const float* a, const float* b) {
  double s = 0.0;
  for (int m = 0; m < kD; ++m) s += double{a[m]} * b[m];
  return s;
}

struct Case {
  int tokens;
  int encoder;
  int past;  // tokens already in the carried state
};

class PrefixKernelTest : public ::testing::TestWithParam<Case> {};

TEST_P(PrefixKernelTest, MatchesFloat64Formula) {
  const Case c = GetParam();
  const int t = c.tokens, e = c.encoder, p = c.past;
  const auto phi_q = Features(t, 1), phi_k = Features(t, 2);
  const auto v = RandomVector(t * kHeads * kHd, 3);
  const auto phi_ke = Features(e, 4);
  const auto ve = RandomVector(e * kHeads * kHd, 5);
  const auto phi_kp = Features(p, 6);
  const auto vp = RandomVector(p * kHeads * kHd, 7);

  // The carried state: sums over `past` tokens, in float (as stored).
  std::vector<float> s(kHeads * kHd * kD, 0.0f), z(kHeads * kD, 0.0f);
  for (int j = 0; j < p; ++j) {
    for (int h = 0; h < kHeads; ++h) {
      const float* kj = &phi_kp[(j * kHeads + h) * kD];
      for (int m = 0; m < kD; ++m) {
        z[h * kD + m] += kj[m];
        for (int x = 0; x < kHd; ++x) {
          s[(h * kHd + x) * kD + m] += vp[(j * kHeads + h) * kHd + x] * kj[m];
        }
      }
    }
  }
  std::vector<double> want_y(t * kHeads * kHd), want_s(s.begin(), s.end()),
      want_z(z.begin(), z.end());
  for (int h = 0; h < kHeads; ++h) {
    for (int i = 0; i < t; ++i) {
      const float* qi = &phi_q[(i * kHeads + h) * kD];
      std::vector<double> num(kHd, 0.0);
      double den = 0.0;
      for (int m = 0; m < kD; ++m) {
        den += double{qi[m]} * z[h * kD + m];
        for (int x = 0; x < kHd; ++x) {
          num[x] += double{qi[m]} * s[(h * kHd + x) * kD + m];
        }
      }
      auto add = [&](const float* k, const float* val) {
        const double a = Dot(qi, k);
        den += a;
        for (int x = 0; x < kHd; ++x) num[x] += a * val[x];
      };
      for (int j = 0; j <= i; ++j) {
        add(&phi_k[(j * kHeads + h) * kD], &v[(j * kHeads + h) * kHd]);
      }
      for (int j = 0; j < e; ++j) {
        add(&phi_ke[(j * kHeads + h) * kD], &ve[(j * kHeads + h) * kHd]);
      }
      for (int x = 0; x < kHd; ++x) {
        want_y[(i * kHeads + h) * kHd + x] = num[x] / (den + kEps);
      }
    }
    auto merge = [&](const std::vector<float>& k, const std::vector<float>& val,
                     int rows) {
      for (int j = 0; j < rows; ++j) {
        for (int m = 0; m < kD; ++m) {
          const double km = k[(j * kHeads + h) * kD + m];
          want_z[h * kD + m] += km;
          for (int x = 0; x < kHd; ++x) {
            want_s[(h * kHd + x) * kD + m] +=
                km * val[(j * kHeads + h) * kHd + x];
          }
        }
      }
    };
    merge(phi_ke, ve, e);
    merge(phi_k, v, t);
  }

  std::vector<float> y(t * kHeads * kHd);
  const LinearAttentionDims dims{kHeads, kHd, kD};
  ASSERT_TRUE(PrefixLinearAttentionPrefill(phi_q, phi_k, v, t, phi_ke, ve, e,
                                           dims, kEps, absl::MakeSpan(s),
                                           absl::MakeSpan(z), absl::MakeSpan(y))
                  .ok());
  const std::string what = "T " + std::to_string(t) + " E " +
                           std::to_string(e) + " past " + std::to_string(p);
  ExpectClose(y, want_y, 1e-5, 1e-4, what + " y");
  ExpectClose(s, want_s, 1e-5, 1e-4, what + " S");
  ExpectClose(z, want_z, 1e-5, 1e-4, what + " z");
}

INSTANTIATE_TEST_SUITE_P(Shapes, PrefixKernelTest,
                         ::testing::Values(Case{1, 1, 0}, Case{5, 0, 0},
                                           Case{5, 5, 0}, Case{20, 7, 0},
                                           Case{64, 64, 0}, Case{65, 64, 0},
                                           Case{150, 40, 0}, Case{30, 100, 0},
                                           Case{70, 10, 9}));

TEST(PrefixKernelArgsTest, RejectsMismatchedSizes) {
  const LinearAttentionDims dims{kHeads, kHd, kD};
  std::vector<float> q(2 * kHeads * kD), v(2 * kHeads * kHd);
  std::vector<float> s(kHeads * kHd * kD), z(kHeads * kD), y(2 * kHeads * kHd);
  // One encoder token claimed, none given.
  EXPECT_EQ(PrefixLinearAttentionPrefill(q, q, v, 2, {}, {}, 1, dims, kEps,
                                         absl::MakeSpan(s), absl::MakeSpan(z),
                                         absl::MakeSpan(y))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PrefixLinearAttentionPrefill(q, q, v, 2, {}, {}, -1, dims, kEps,
                                         absl::MakeSpan(s), absl::MakeSpan(z),
                                         absl::MakeSpan(y))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(PrefixLinearAttentionPrefill(q, q, v, 2, {}, {}, 0, dims, kEps,
                                           absl::MakeSpan(s), absl::MakeSpan(z),
                                           absl::MakeSpan(y))
                  .ok());
}

}  // namespace
}  // namespace twice::kernels
