// CausalConv1d and WindowAttention against float64 references, including
// sequences split at every position (the carried tail / cached keys must
// make the pieces equal the whole), serially and split over 1-8 threads.
// Tolerance 1e-5 absolute + 1e-5 relative.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/causal_conv1d.h"
#include "kernels/window_attention.h"
#include "tests/kernels/kernel_test_util.h"

namespace twice::kernels {
namespace {

using testing::ExpectClose;
using testing::RandomVector;

TEST(CausalConv1dTest, MatchesReferenceWhenSplitAnywhere) {
  const int t = 12, c = 5, k = 3, stride = 9;  // x is a column range
  const auto x = RandomVector(t * stride, 1);
  const auto w = RandomVector(c * k, 2);
  std::vector<double> want(t * c, 0.0);
  for (int i = 0; i < t; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      for (int j = 0; j < k; ++j) {
        const int src = i - (k - 1) + j;
        if (src >= 0)
          want[i * c + ch] += double{w[ch * k + j]} * x[src * stride + 2 + ch];
      }
    }
  }
  for (int split = 0; split <= t; ++split) {
    std::vector<float> tail((k - 1) * c, 0.0f), out(t * c);
    // Three pieces: [0, split), one token, the rest (when any).
    int begin = 0;
    for (int n : {split, std::min(1, t - split), std::max(0, t - split - 1)}) {
      if (n == 0) continue;
      ASSERT_TRUE(
          CausalConv1d(absl::MakeConstSpan(x).subspan(begin * stride + 2), n, c,
                       stride, w, k, absl::MakeSpan(tail),
                       absl::MakeSpan(out).subspan(begin * c, n * c))
              .ok());
      begin += n;
    }
    ExpectClose(out, want, 1e-5, 1e-5, "split " + std::to_string(split));
    // The tail holds the last K-1 inputs.
    for (int r = 0; r < k - 1; ++r) {
      for (int ch = 0; ch < c; ++ch) {
        EXPECT_EQ(tail[r * c + ch], x[(t - (k - 1) + r) * stride + 2 + ch]);
      }
    }
  }
}

// Long reads split over threads, kernel width 4 (a 3-row tail), pieces of
// 1, 2 and many tokens (pieces shorter than the tail shift it).
TEST(CausalConv1dTest, ThreadedWideKernelMatchesReference) {
  const int t = 700, c = 96, k = 4, stride = 100;
  const auto x = RandomVector(t * stride, 11);
  const auto w = RandomVector(c * k, 12);
  std::vector<double> want(t * c, 0.0);
  for (int i = 0; i < t; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      for (int j = 0; j < k; ++j) {
        const int src = i - (k - 1) + j;
        if (src >= 0)
          want[i * c + ch] += double{w[ch * k + j]} * x[src * stride + ch];
      }
    }
  }
  testing::ForEachThreadCount([&](int) {
    std::vector<float> tail((k - 1) * c, 0.0f), out(t * c);
    int begin = 0;
    for (int n : {1, 2, 1, 300, 2, 394}) {
      ASSERT_TRUE(CausalConv1d(absl::MakeConstSpan(x).subspan(begin * stride),
                               n, c, stride, w, k, absl::MakeSpan(tail),
                               absl::MakeSpan(out).subspan(begin * c, n * c))
                      .ok());
      begin += n;
    }
    ASSERT_EQ(begin, t);
    ExpectClose(out, want, 1e-5, 1e-5);
    for (int r = 0; r < k - 1; ++r) {
      for (int ch = 0; ch < c; ++ch) {
        EXPECT_EQ(tail[r * c + ch], x[(t - (k - 1) + r) * stride + ch]);
      }
    }
  });
}

TEST(CausalConv1dTest, RejectsBadShapes) {
  std::vector<float> x(10), w(6), tail(4), out(10);
  EXPECT_FALSE(CausalConv1d(x, 5, 2, 2, w, 3, absl::MakeSpan(tail).subspan(1),
                            absl::MakeSpan(out))
                   .ok());
  EXPECT_FALSE(
      CausalConv1d(x, 5, 2, 1, w, 3, absl::MakeSpan(tail), absl::MakeSpan(out))
          .ok());
}

// Reference over a full sequence of n tokens: query i sees [max(0, i-L), i].
std::vector<double> WindowReference(const std::vector<float>& q,
                                    const std::vector<float>& k,
                                    const std::vector<float>& v, int n, int h,
                                    int hd, int window, double scale) {
  std::vector<double> out(n * h * hd, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int hh = 0; hh < h; ++hh) {
      const int lo = std::max(0, i - window);
      std::vector<double> p(i - lo + 1);
      double mx = -1e300, z = 0.0;
      for (int j = lo; j <= i; ++j) {
        double s = 0.0;
        for (int e = 0; e < hd; ++e) {
          s += double{q[(i * h + hh) * hd + e]} * k[(j * h + hh) * hd + e];
        }
        p[j - lo] = s * scale;
        mx = std::max(mx, p[j - lo]);
      }
      for (double& x : p) z += (x = std::exp(x - mx));
      for (int j = lo; j <= i; ++j) {
        for (int e = 0; e < hd; ++e) {
          out[(i * h + hh) * hd + e] +=
              p[j - lo] / z * v[(j * h + hh) * hd + e];
        }
      }
    }
  }
  return out;
}

TEST(WindowAttentionTest, MatchesReferenceWithCachedKeys) {
  const int n = 40, h = 2, hd = 8, window = 6;
  const double scale = 1.0 / std::sqrt(8.0);
  const auto q = RandomVector(n * h * hd, 3, 2.0f);
  const auto k = RandomVector(n * h * hd, 4, 2.0f);
  const auto v = RandomVector(n * h * hd, 5);
  const auto want = WindowReference(q, k, v, n, h, hd, window, scale);
  // Queries [begin, n) with the `past` keys before them available.
  for (int begin : {0, 1, 5, 6, 7, 20, 39}) {
    const int past = std::min(begin, window);
    const int t = n - begin;
    std::vector<float> ck(k.begin() + (begin - past) * h * hd, k.end());
    std::vector<float> cv(v.begin() + (begin - past) * h * hd, v.end());
    std::vector<float> qq(q.begin() + begin * h * hd, q.end());
    std::vector<float> out(t * h * hd);
    ASSERT_TRUE(WindowAttention(qq, h * hd, ck, cv, {t, past, h, hd, window},
                                static_cast<float>(scale), absl::MakeSpan(out))
                    .ok());
    ExpectClose(out,
                std::vector<double>(want.begin() + begin * h * hd, want.end()),
                1e-5, 1e-5, "begin " + std::to_string(begin));
  }
}

// Query blocks (64) split over heads and threads: reads starting at and
// around block edges, one-token decode reads, a window of 0 (self only) and
// one wider than the context (full causal attention).
TEST(WindowAttentionTest, ThreadedBlocksMatchReference) {
  const int n = 300, h = 4, hd = 32;
  const double scale = 1.0 / std::sqrt(32.0);
  const auto q = RandomVector(n * h * hd, 13, 2.0f);
  const auto k = RandomVector(n * h * hd, 14, 2.0f);
  const auto v = RandomVector(n * h * hd, 15);
  for (int window : {0, 100, 1000}) {
    const auto want = WindowReference(q, k, v, n, h, hd, window, scale);
    testing::ForEachThreadCount([&](int) {
      for (int begin : {0, 1, 63, 64, 65, 150, 299}) {
        const int past = std::min(begin, window);
        // The whole rest, and a single decode token.
        for (int t : {n - begin, 1}) {
          std::vector<float> ck(k.begin() + (begin - past) * h * hd,
                                k.begin() + (begin + t) * h * hd);
          std::vector<float> cv(v.begin() + (begin - past) * h * hd,
                                v.begin() + (begin + t) * h * hd);
          std::vector<float> qq(q.begin() + begin * h * hd,
                                q.begin() + (begin + t) * h * hd);
          std::vector<float> out(t * h * hd);
          ASSERT_TRUE(
              WindowAttention(qq, h * hd, ck, cv, {t, past, h, hd, window},
                              static_cast<float>(scale), absl::MakeSpan(out))
                  .ok());
          ExpectClose(out,
                      std::vector<double>(want.begin() + begin * h * hd,
                                          want.begin() + (begin + t) * h * hd),
                      1e-5, 1e-5,
                      "window " + std::to_string(window) + " begin " +
                          std::to_string(begin) + " t " + std::to_string(t));
        }
      }
    });
  }
}

TEST(WindowAttentionTest, RejectsBadShapes) {
  std::vector<float> q(16), k(16), v(16), out(16);
  EXPECT_FALSE(WindowAttention(q, 16, k, v, {1, 1, 2, 8, 4}, 1.0f,
                               absl::MakeSpan(out))
                   .ok());  // k must hold P + T = 2 rows
  EXPECT_FALSE(WindowAttention(q, 8, k, v, {1, 0, 2, 8, 4}, 1.0f,
                               absl::MakeSpan(out))
                   .ok());  // stride < H * hd
}

}  // namespace
}  // namespace twice::kernels
