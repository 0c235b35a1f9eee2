// Linear attention: the chunked prefill and the recurrent step against a
// float64 quadratic-form reference
//   y_i = sum_{j<=i} (phi_q_i · phi_k_j) v_j / (sum_{j<=i} phi_q_i · phi_k_j +
//   eps)
// and against each other (design §3 invariant 4), across chunk boundaries
// (chunk = 64) and with a carried state. Features are real Taylor features
// (F = 16, D = 273), so denominators are >= T/2. Tolerance: 1e-5 absolute +
// 1e-4 relative on outputs and states.
#include "kernels/linear_attention.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/taylor_feature_map.h"
#include "tests/kernels/kernel_test_util.h"

namespace twice::kernels {
namespace {

using testing::ExpectClose;
using testing::RandomVector;

constexpr int kF = 16;
constexpr int kD = 1 + kF + kF * kF;
constexpr float kEps = 1e-12f;
// The small shape keeps every kernel on its serial path; the wide one
// (state 4 x 16 x 273 floats) is large enough to be split over heads.
constexpr int kSmallHeads = 2, kSmallHd = 8;
constexpr int kWideHeads = 4, kWideHd = 16;

struct Inputs {
  int heads = kSmallHeads, hd = kSmallHd;
  std::vector<float> phi_q, phi_k, v;  // [T, H, D], [T, H, D], [T, H, hd]
};

Inputs MakeInputs(int t, uint32_t seed, int heads = kSmallHeads,
                  int hd = kSmallHd) {
  const auto q = RandomVector(t * heads * kF, seed, 0.7f);
  const auto k = RandomVector(t * heads * kF, seed + 1, 0.7f);
  Inputs in;
  in.heads = heads;
  in.hd = hd;
  in.phi_q.resize(t * heads * kD);
  in.phi_k.resize(t * heads * kD);
  EXPECT_TRUE(
      TaylorFeatureMap(q, t * heads, kF, absl::MakeSpan(in.phi_q)).ok());
  EXPECT_TRUE(
      TaylorFeatureMap(k, t * heads, kF, absl::MakeSpan(in.phi_k)).ok());
  in.v = RandomVector(t * heads * hd, seed + 2);
  return in;
}

struct Expected {
  std::vector<double> y, s, z;
};

Expected Reference(const Inputs& in, int t) {
  const int heads = in.heads, hd = in.hd;
  Expected e;
  e.y.assign(t * heads * hd, 0.0);
  e.s.assign(heads * hd * kD, 0.0);
  e.z.assign(heads * kD, 0.0);
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < t; ++i) {
      double den = 0.0;
      for (int j = 0; j <= i; ++j) {
        double a = 0.0;
        for (int m = 0; m < kD; ++m) {
          a += double{in.phi_q[(i * heads + h) * kD + m]} *
               in.phi_k[(j * heads + h) * kD + m];
        }
        den += a;
        for (int c = 0; c < hd; ++c) {
          e.y[(i * heads + h) * hd + c] += a * in.v[(j * heads + h) * hd + c];
        }
      }
      for (int c = 0; c < hd; ++c) e.y[(i * heads + h) * hd + c] /= den + kEps;
    }
    for (int j = 0; j < t; ++j) {
      for (int m = 0; m < kD; ++m) {
        const double k = in.phi_k[(j * heads + h) * kD + m];
        e.z[h * kD + m] += k;
        for (int c = 0; c < hd; ++c) {
          e.s[(h * hd + c) * kD + m] += k * in.v[(j * heads + h) * hd + c];
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

constexpr int kHeads = kSmallHeads, kHd = kSmallHd;
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

// Heads split over the pool: prefill at chunk edges and recurrent steps,
// for every thread count, against the float64 reference.
TEST(LinearAttentionTest, ThreadedPrefillAndStepsMatchReference) {
  const LinearAttentionDims dims{kWideHeads, kWideHd, kD};
  const int row_qk = kWideHeads * kD, row_v = kWideHeads * kWideHd;
  testing::ForEachThreadCount([&](int) {
    for (int t : {1, 63, 64, 65, 130}) {
      const Inputs in = MakeInputs(t, 20 + t, kWideHeads, kWideHd);
      const Expected e = Reference(in, t);
      std::vector<float> s(kWideHeads * kWideHd * kD), z(kWideHeads * kD),
          y(t * row_v);
      ASSERT_TRUE(LinearAttentionPrefill(in.phi_q, in.phi_k, in.v, t, dims,
                                         kEps, absl::MakeSpan(s),
                                         absl::MakeSpan(z), absl::MakeSpan(y))
                      .ok());
      ExpectClose(y, e.y, 1e-5, 1e-4, "prefill y, T=" + std::to_string(t));
      ExpectClose(s, e.s, 1e-5, 1e-4, "prefill S");
      ExpectClose(z, e.z, 1e-5, 1e-4, "prefill z");
      std::fill(s.begin(), s.end(), 0.0f);
      std::fill(z.begin(), z.end(), 0.0f);
      for (int i = 0; i < t; ++i) {
        ASSERT_TRUE(LinearAttentionStep(
                        Slice(in.phi_q, i, 1, row_qk),
                        Slice(in.phi_k, i, 1, row_qk), Slice(in.v, i, 1, row_v),
                        dims, kEps, absl::MakeSpan(s), absl::MakeSpan(z),
                        absl::MakeSpan(y).subspan(i * row_v, row_v))
                        .ok());
      }
      ExpectClose(y, e.y, 1e-5, 1e-4, "step y, T=" + std::to_string(t));
      ExpectClose(s, e.s, 1e-5, 1e-4, "step S");
    }
  });
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
