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

constexpr int kPrefixHeads = 2, kPrefixHd = 8, kPrefixF = 16;
constexpr int kPrefixD = 1 + kPrefixF + kPrefixF * kPrefixF;
constexpr float kPrefixEps = 1e-12f;

// Featurized [rows, H, D] from random raw [rows, H, F].
std::vector<float> Features(int rows, uint32_t seed) {
  const auto raw = RandomVector(rows * kPrefixHeads * kPrefixF, seed, 0.7f);
  std::vector<float> phi(rows * kPrefixHeads * kPrefixD);
  EXPECT_TRUE(
      TaylorFeatureMap(raw, rows * kPrefixHeads, kPrefixF, absl::MakeSpan(phi))
          .ok());
  return phi;
}

double Dot(const float* a, const float* b) {
  double s = 0.0;
  for (int m = 0; m < kPrefixD; ++m) s += double{a[m]} * b[m];
  return s;
}

struct PrefixKernelCase {
  int tokens;
  int encoder;
  int past;  // tokens already in the carried state
};

class PrefixKernelTest : public ::testing::TestWithParam<PrefixKernelCase> {};

TEST_P(PrefixKernelTest, MatchesFloat64Formula) {
  const PrefixKernelCase c = GetParam();
  const int t = c.tokens, e = c.encoder, p = c.past;
  const auto phi_q = Features(t, 1), phi_k = Features(t, 2);
  const auto v = RandomVector(t * kPrefixHeads * kPrefixHd, 3);
  const auto phi_ke = Features(e, 4);
  const auto ve = RandomVector(e * kPrefixHeads * kPrefixHd, 5);
  const auto phi_kp = Features(p, 6);
  const auto vp = RandomVector(p * kPrefixHeads * kPrefixHd, 7);

  // The carried state: sums over `past` tokens, in float (as stored).
  std::vector<float> s(kPrefixHeads * kPrefixHd * kPrefixD, 0.0f),
      z(kPrefixHeads * kPrefixD, 0.0f);
  for (int j = 0; j < p; ++j) {
    for (int h = 0; h < kPrefixHeads; ++h) {
      const float* kj = &phi_kp[(j * kPrefixHeads + h) * kPrefixD];
      for (int m = 0; m < kPrefixD; ++m) {
        z[h * kPrefixD + m] += kj[m];
        for (int x = 0; x < kPrefixHd; ++x) {
          s[(h * kPrefixHd + x) * kPrefixD + m] +=
              vp[(j * kPrefixHeads + h) * kPrefixHd + x] * kj[m];
        }
      }
    }
  }
  std::vector<double> want_y(t * kPrefixHeads * kPrefixHd),
      want_s(s.begin(), s.end()), want_z(z.begin(), z.end());
  for (int h = 0; h < kPrefixHeads; ++h) {
    for (int i = 0; i < t; ++i) {
      const float* qi = &phi_q[(i * kPrefixHeads + h) * kPrefixD];
      std::vector<double> num(kPrefixHd, 0.0);
      double den = 0.0;
      for (int m = 0; m < kPrefixD; ++m) {
        den += double{qi[m]} * z[h * kPrefixD + m];
        for (int x = 0; x < kPrefixHd; ++x) {
          num[x] += double{qi[m]} * s[(h * kPrefixHd + x) * kPrefixD + m];
        }
      }
      auto add = [&](const float* k, const float* val) {
        const double a = Dot(qi, k);
        den += a;
        for (int x = 0; x < kPrefixHd; ++x) num[x] += a * val[x];
      };
      for (int j = 0; j <= i; ++j) {
        add(&phi_k[(j * kPrefixHeads + h) * kPrefixD],
            &v[(j * kPrefixHeads + h) * kPrefixHd]);
      }
      for (int j = 0; j < e; ++j) {
        add(&phi_ke[(j * kPrefixHeads + h) * kPrefixD],
            &ve[(j * kPrefixHeads + h) * kPrefixHd]);
      }
      for (int x = 0; x < kPrefixHd; ++x) {
        want_y[(i * kPrefixHeads + h) * kPrefixHd + x] =
            num[x] / (den + kPrefixEps);
      }
    }
    auto merge = [&](const std::vector<float>& k, const std::vector<float>& val,
                     int rows) {
      for (int j = 0; j < rows; ++j) {
        for (int m = 0; m < kPrefixD; ++m) {
          const double km = k[(j * kPrefixHeads + h) * kPrefixD + m];
          want_z[h * kPrefixD + m] += km;
          for (int x = 0; x < kPrefixHd; ++x) {
            want_s[(h * kPrefixHd + x) * kPrefixD + m] +=
                km * val[(j * kPrefixHeads + h) * kPrefixHd + x];
          }
        }
      }
    };
    merge(phi_ke, ve, e);
    merge(phi_k, v, t);
  }

  std::vector<float> y(t * kPrefixHeads * kPrefixHd);
  const LinearAttentionDims dims{kPrefixHeads, kPrefixHd, kPrefixD};
  ASSERT_TRUE(PrefixLinearAttentionPrefill(phi_q, phi_k, v, t, phi_ke, ve, e,
                                           dims, kPrefixEps, absl::MakeSpan(s),
                                           absl::MakeSpan(z), absl::MakeSpan(y))
                  .ok());
  const std::string what = "T " + std::to_string(t) + " E " +
                           std::to_string(e) + " past " + std::to_string(p);
  ExpectClose(y, want_y, 1e-5, 1e-4, what + " y");
  ExpectClose(s, want_s, 1e-5, 1e-4, what + " S");
  ExpectClose(z, want_z, 1e-5, 1e-4, what + " z");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PrefixKernelTest,
    ::testing::Values(PrefixKernelCase{1, 1, 0}, PrefixKernelCase{5, 0, 0},
                      PrefixKernelCase{5, 5, 0}, PrefixKernelCase{20, 7, 0},
                      PrefixKernelCase{64, 64, 0}, PrefixKernelCase{65, 64, 0},
                      PrefixKernelCase{150, 40, 0},
                      PrefixKernelCase{30, 100, 0},
                      PrefixKernelCase{70, 10, 9}));

TEST(PrefixKernelArgsTest, RejectsMismatchedSizes) {
  const LinearAttentionDims dims{kPrefixHeads, kPrefixHd, kPrefixD};
  std::vector<float> q(2 * kPrefixHeads * kPrefixD),
      v(2 * kPrefixHeads * kPrefixHd);
  std::vector<float> s(kPrefixHeads * kPrefixHd * kPrefixD),
      z(kPrefixHeads * kPrefixD), y(2 * kPrefixHeads * kPrefixHd);
  // One encoder token claimed, none given.
  EXPECT_EQ(PrefixLinearAttentionPrefill(q, q, v, 2, {}, {}, 1, dims,
                                         kPrefixEps, absl::MakeSpan(s),
                                         absl::MakeSpan(z), absl::MakeSpan(y))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PrefixLinearAttentionPrefill(q, q, v, 2, {}, {}, -1, dims,
                                         kPrefixEps, absl::MakeSpan(s),
                                         absl::MakeSpan(z), absl::MakeSpan(y))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(PrefixLinearAttentionPrefill(q, q, v, 2, {}, {}, 0, dims,
                                           kPrefixEps, absl::MakeSpan(s),
                                           absl::MakeSpan(z), absl::MakeSpan(y))
                  .ok());
}

}  // namespace
}  // namespace twice::kernels
