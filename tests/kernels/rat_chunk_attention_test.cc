// RatChunkAttention on the CPU against a float64 reference written from
// the formula (one softmax over the visible closed chunks' keys and the
// token's own running key), on random inputs of odd sizes, with keys and
// values interleaved in one state row as RatChunkKvState keeps them and
// queries taken as a column range of a wider matrix.
#include "kernels/rat_chunk_attention.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels {
namespace {

using testing::ExpectClose;
using testing::RandomVector;

// out[t][h] = softmax over {K_j[h] : j < visible[t]} ∪ {k̄_t[h]} of
// scale·q·key, times the matching values; float64 throughout.
std::vector<double> Reference(const std::vector<float>& q, int64_t q_stride,
                              const std::vector<float>& own_k,
                              const std::vector<float>& own_v,
                              const std::vector<float>& state,
                              const std::vector<int64_t>& visible,
                              const RatAttentionDims& dims, double scale) {
  const int64_t d = dims.heads * dims.head_dim, hd = dims.head_dim;
  std::vector<double> out(dims.tokens * d, 0.0);
  for (int64_t t = 0; t < dims.tokens; ++t) {
    for (int64_t h = 0; h < dims.heads; ++h) {
      auto score = [&](const float* key) {
        double s = 0;
        for (int64_t e = 0; e < hd; ++e) {
          s += static_cast<double>(q[t * q_stride + h * hd + e]) *
               key[h * hd + e];
        }
        return scale * s;
      };
      std::vector<double> s;
      for (int64_t j = 0; j < visible[t]; ++j) {
        s.push_back(score(state.data() + j * 2 * d));
      }
      s.push_back(score(own_k.data() + t * d));
      double m = -INFINITY, sum = 0;
      for (double v : s) m = std::max(m, v);
      for (double& v : s) sum += (v = std::exp(v - m));
      for (int64_t j = 0; j < static_cast<int64_t>(s.size()); ++j) {
        const float* value = j < visible[t] ? state.data() + j * 2 * d + d
                                            : own_v.data() + t * d;
        for (int64_t e = 0; e < hd; ++e) {
          out[t * d + h * hd + e] += s[j] / sum * value[h * hd + e];
        }
      }
    }
  }
  return out;
}

TEST(RatChunkAttentionTest, MatchesFloat64ReferenceOnOddShapes) {
  struct RatKernelCase {
    int64_t tokens, chunks, heads, head_dim;
  };
  uint32_t seed = 1;
  for (const RatKernelCase& c :
       {RatKernelCase{1, 0, 1, 2}, RatKernelCase{1, 7, 3, 10},
        RatKernelCase{5, 13, 2, 6}, RatKernelCase{3, 257, 4, 32},
        RatKernelCase{2, 33, 16, 8}}) {
    SCOPED_TRACE(::testing::Message()
                 << c.tokens << " tokens, " << c.chunks << " chunks, "
                 << c.heads << "x" << c.head_dim);
    const RatAttentionDims dims{c.tokens, c.chunks, c.heads, c.head_dim};
    const int64_t d = c.heads * c.head_dim, q_stride = d + 3;
    const std::vector<float> q = RandomVector(c.tokens * q_stride, seed++);
    const std::vector<float> own_k = RandomVector(c.tokens * d, seed++);
    const std::vector<float> own_v = RandomVector(c.tokens * d, seed++);
    const std::vector<float> state =
        RandomVector(std::max<int64_t>(c.chunks, 1) * 2 * d, seed++);
    // Tokens see different numbers of chunks, the last all of them.
    std::vector<int64_t> visible(c.tokens);
    for (int64_t t = 0; t < c.tokens; ++t) {
      visible[t] = c.chunks - (c.tokens - 1 - t) * c.chunks / (2 * c.tokens);
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const absl::Span<const float> closed(state);
    std::vector<float> out(c.tokens * d, -1.0f);
    ASSERT_OK(RatChunkAttention(
        {q, q_stride}, {own_k, d}, {own_v, d}, {closed, 2 * d},
        {closed.subspan(std::min<size_t>(d, closed.size())), 2 * d}, visible,
        dims, scale, absl::MakeSpan(out)));
    ExpectClose(
        out, Reference(q, q_stride, own_k, own_v, state, visible, dims, scale),
        1e-5, 1e-4);
  }
}

TEST(RatChunkAttentionTest, RefusesVisibleCountsPastTheChunks) {
  const RatAttentionDims dims{1, 2, 1, 2};
  std::vector<float> row(4, 0.0f), out(2);
  const std::vector<int64_t> visible = {3};
  EXPECT_TRUE(absl::IsInvalidArgument(
      RatChunkAttention({row, 2}, {row, 2}, {row, 2}, {row, 2}, {row, 2},
                        visible, dims, 1.0f, absl::MakeSpan(out))));
}

}  // namespace
}  // namespace twice::kernels
