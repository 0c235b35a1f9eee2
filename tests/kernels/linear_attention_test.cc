// Linear attention: the chunked prefill and the recurrent step against a
// float64 quadratic-form reference
//   y_i = sum_{j<=i} (phi_q_i · phi_k_j) v_j / (sum_{j<=i} phi_q_i · phi_k_j +
//   eps)
// and against each other (design §3 invariant 4), across chunk boundaries
// (chunk = 64) and with a carried state. Features are real Taylor features
// (F = 16, D = 273), so denominators are >= T/2. Tolerance: 1e-5 absolute +
// 1e-4 relative on outputs and states.
#include "kernels/linear_attention.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/taylor_feature_map.h"
#include "tests/kernels/kernel_test_util.h"

namespace twice::kernels {
namespace {

using testing::ExpectClose;
using testing::RandomVector;

constexpr int kHeads = 2, kHd = 8, kF = 16;
constexpr int kD = 1 + kF + kF * kF;
constexpr float kEps = 1e-12f;

struct Inputs {
  std::vector<float> phi_q, phi_k, v;  // [T, H, D], [T, H, D], [T, H, hd]
};

Inputs MakeInputs(int t, uint32_t seed) {
  const auto q = RandomVector(t * kHeads * kF, seed, 0.7f);
  const auto k = RandomVector(t * kHeads * kF, seed + 1, 0.7f);
  Inputs in;
  in.phi_q.resize(t * kHeads * kD);
  in.phi_k.resize(t * kHeads * kD);
  EXPECT_TRUE(
      TaylorFeatureMap(q, t * kHeads, kF, absl::MakeSpan(in.phi_q)).ok());
  EXPECT_TRUE(
      TaylorFeatureMap(k, t * kHeads, kF, absl::MakeSpan(in.phi_k)).ok());
  in.v = RandomVector(t * kHeads * kHd, seed + 2);
  return in;
}

struct Expected {
  std::vector<double> y, s, z;
};

Expected Reference(const Inputs& in, int t) {
  Expected e;
  e.y.assign(t * kHeads * kHd, 0.0);
  e.s.assign(kHeads * kHd * kD, 0.0);
  e.z.assign(kHeads * kD, 0.0);
  for (int h = 0; h < kHeads; ++h) {
    for (int i = 0; i < t; ++i) {
      double den = 0.0;
      for (int j = 0; j <= i; ++j) {
        double a = 0.0;
        for (int m = 0; m < kD; ++m) {
          a += double{in.phi_q[(i * kHeads + h) * kD + m]} *
               in.phi_k[(j * kHeads + h) * kD + m];
        }
        den += a;
        for (int c = 0; c < kHd; ++c) {
          e.y[(i * kHeads + h) * kHd + c] +=
              a * in.v[(j * kHeads + h) * kHd + c];
        }
      }
      for (int c = 0; c < kHd; ++c)
        e.y[(i * kHeads + h) * kHd + c] /= den + kEps;
    }
    for (int j = 0; j < t; ++j) {
      for (int m = 0; m < kD; ++m) {
        const double k = in.phi_k[(j * kHeads + h) * kD + m];
        e.z[h * kD + m] += k;
        for (int c = 0; c < kHd; ++c) {
          e.s[(h * kHd + c) * kD + m] += k * in.v[(j * kHeads + h) * kHd + c];
        }
      }
    }
  }
  return e;
}

template <typename T>
std::vector<T> Slice(const std::vector<T>& v, int begin_row, int rows,
                     int row_size) {
  return std::vector<T>(v.begin() + begin_row * row_size,
                        v.begin() + (begin_row + rows) * row_size);
}

const LinearAttentionDims kDims{kHeads, kHd, kD};

TEST(LinearAttentionTest, PrefillMatchesReferenceAcrossChunks) {
  for (int t : {1, 2, 63, 64, 65, 150}) {
    const Inputs in = MakeInputs(t, 10 + t);
    std::vector<float> s(kHeads * kHd * kD), z(kHeads * kD),
        y(t * kHeads * kHd);
    ASSERT_TRUE(LinearAttentionPrefill(in.phi_q, in.phi_k, in.v, t, kDims, kEps,
                                       absl::MakeSpan(s), absl::MakeSpan(z),
                                       absl::MakeSpan(y))
                    .ok());
    const Expected e = Reference(in, t);
    ExpectClose(y, e.y, 1e-5, 1e-4, "y, T=" + std::to_string(t));
    ExpectClose(s, e.s, 1e-5, 1e-4, "S");
    ExpectClose(z, e.z, 1e-5, 1e-4, "z");
  }
}

TEST(LinearAttentionTest, RecurrentStepsEqualChunkedPrefill) {
  const int t = 130;
  const Inputs in = MakeInputs(t, 3);
  std::vector<float> s(kHeads * kHd * kD), z(kHeads * kD), y(t * kHeads * kHd);
  ASSERT_TRUE(LinearAttentionPrefill(in.phi_q, in.phi_k, in.v, t, kDims, kEps,
                                     absl::MakeSpan(s), absl::MakeSpan(z),
                                     absl::MakeSpan(y))
                  .ok());
  std::vector<float> rs(s.size()), rz(z.size()), ry(y.size());
  for (int i = 0; i < t; ++i) {
    ASSERT_TRUE(LinearAttentionStep(
                    Slice(in.phi_q, i, 1, kHeads * kD),
                    Slice(in.phi_k, i, 1, kHeads * kD),
                    Slice(in.v, i, 1, kHeads * kHd), kDims, kEps,
                    absl::MakeSpan(rs), absl::MakeSpan(rz),
                    absl::MakeSpan(ry).subspan(i * kHeads * kHd, kHeads * kHd))
                    .ok());
  }
  ExpectClose(ry, std::vector<double>(y.begin(), y.end()), 1e-5, 1e-4, "y");
  ExpectClose(rs, std::vector<double>(s.begin(), s.end()), 1e-5, 1e-4, "S");
  ExpectClose(rz, std::vector<double>(z.begin(), z.end()), 1e-5, 1e-4, "z");
}

TEST(LinearAttentionTest, CarriedStateEqualsOnePass) {
  const int t = 100;
  const Inputs in = MakeInputs(t, 4);
  const Expected e = Reference(in, t);
  for (int split : {1, 37, 64, 99}) {
    std::vector<float> s(kHeads * kHd * kD), z(kHeads * kD),
        y(t * kHeads * kHd);
    for (auto [begin, n] : {std::pair{0, split}, std::pair{split, t - split}}) {
      ASSERT_TRUE(
          LinearAttentionPrefill(
              Slice(in.phi_q, begin, n, kHeads * kD),
              Slice(in.phi_k, begin, n, kHeads * kD),
              Slice(in.v, begin, n, kHeads * kHd), n, kDims, kEps,
              absl::MakeSpan(s), absl::MakeSpan(z),
              absl::MakeSpan(y).subspan(begin * kHeads * kHd, n * kHeads * kHd))
              .ok());
    }
    ExpectClose(y, e.y, 1e-5, 1e-4, "split " + std::to_string(split));
    ExpectClose(s, e.s, 1e-5, 1e-4, "S");
  }
}

TEST(LinearAttentionTest, RejectsMismatchedSizes) {
  const Inputs in = MakeInputs(3, 5);
  std::vector<float> s(kHeads * kHd * kD), z(kHeads * kD), y(3 * kHeads * kHd);
  EXPECT_FALSE(LinearAttentionPrefill(in.phi_q, in.phi_k, in.v, 4, kDims, kEps,
                                      absl::MakeSpan(s), absl::MakeSpan(z),
                                      absl::MakeSpan(y))
                   .ok());
  EXPECT_FALSE(LinearAttentionPrefill(in.phi_q, in.phi_k, in.v, 3, kDims, kEps,
                                      absl::MakeSpan(s).subspan(1),
                                      absl::MakeSpan(z), absl::MakeSpan(y))
                   .ok());
  EXPECT_FALSE(LinearAttentionStep(in.phi_q, in.phi_k, in.v, kDims, kEps,
                                   absl::MakeSpan(s), absl::MakeSpan(z),
                                   absl::MakeSpan(y))
                   .ok());
}

}  // namespace
}  // namespace twice::kernels
