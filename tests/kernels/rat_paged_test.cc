// RAT over paged closed chunks (kernels/rat_paged.h) against a float64
// reference written here from engine/layers/rat_attention.h's equations:
// one sequence read in prefill passes that start mid-chunk (the recurrence
// carried in its open slot), and a batched step over sequences at chunk
// starts and chunk ends; shuffled block tables; grouped q/k tiled over the
// heads. Bad input is refused before anything is written.
//
// Seeds: fixed by default, TWICE_KERNEL_TEST_SEED picks another; printed.
#include "kernels/rat_paged.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels {
namespace {

using testing::ExpectClose;
using testing::RandomVector;

uint32_t RatPagedSeed() {
  static const uint32_t seed = [] {
    const char* env = std::getenv("TWICE_KERNEL_TEST_SEED");
    const uint32_t s =
        env != nullptr ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10))
                       : 20261207u;
    std::printf("rat paged seed %u\n", s);
    return s;
  }();
  return seed;
}

double RefSigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Rotate-half of each head of x [D] by position c, in double.
void RefRotate(std::vector<double>& x, int64_t heads, int64_t hd, int64_t c,
               double base) {
  const int64_t half = hd / 2;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t f = 0; f < half; ++f) {
      const double angle =
          static_cast<double>(c) * std::pow(base, -2.0 * f / hd);
      double& a = x[h * hd + f];
      double& b = x[h * hd + half + f];
      const double a0 = a, b0 = b;
      a = a0 * std::cos(angle) - b0 * std::sin(angle);
      b = b0 * std::cos(angle) + a0 * std::sin(angle);
    }
  }
}

// One sequence's RAT outputs for all its tokens, in double: the gated
// attention output per token [T, D].
std::vector<double> RefRat(const std::vector<float>& proj, int64_t tokens,
                           const std::vector<float>& bias,
                           const RatPagedDims& dims, float scale) {
  const int64_t d = dims.dim, hd = dims.head_dim(), h = dims.heads;
  const int64_t qk = dims.groups * hd, w = dims.proj_width();
  std::vector<double> rk(d, 0.0), rv(d, 0.0), out(tokens * d, 0.0);
  std::vector<std::vector<double>> ck, cv;  // closed chunks
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = proj.data() + t * w;
    const bool first = t % dims.chunk_size == 0;
    std::vector<double> q(d), k(d), z(d);
    for (int64_t j = 0; j < d; ++j) {
      const double g = RefSigmoid(double{row[2 * d + j]} + bias[j]);
      const double kj = row[3 * d + qk + j % qk];
      rk[j] = first ? (1 - g) * kj : g * rk[j] + (1 - g) * kj;
      rv[j] = first ? (1 - g) * row[d + j] : g * rv[j] + (1 - g) * row[d + j];
      q[j] = row[3 * d + j % qk];
      z[j] = RefSigmoid(row[j]);
    }
    k = rk;
    const int64_t c = t / dims.chunk_size;
    RefRotate(q, h, hd, c, dims.rope_base);
    RefRotate(k, h, hd, c, dims.rope_base);
    for (int64_t head = 0; head < h; ++head) {
      std::vector<double> s;
      for (int64_t cc = 0; cc <= c; ++cc) {
        const std::vector<double>& key = cc < c ? ck[cc] : k;
        double dot = 0.0;
        for (int64_t e = 0; e < hd; ++e) {
          dot += q[head * hd + e] * key[head * hd + e];
        }
        s.push_back(dot * scale);
      }
      const double m = *std::max_element(s.begin(), s.end());
      double sum = 0.0;
      for (double& x : s) sum += (x = std::exp(x - m));
      for (int64_t cc = 0; cc <= c; ++cc) {
        const std::vector<double>& value = cc < c ? cv[cc] : rv;
        for (int64_t e = 0; e < hd; ++e) {
          out[t * d + head * hd + e] +=
              s[cc] / sum * value[head * hd + e] * z[head * hd + e];
        }
      }
    }
    if (t % dims.chunk_size == dims.chunk_size - 1) {
      ck.push_back(k);
      cv.push_back(rv);
    }
  }
  return out;
}

// A pool of `blocks` blocks handed out in a shuffled order.
std::vector<int32_t> ShuffledBlocks(int64_t blocks, uint32_t seed) {
  std::vector<int32_t> order(blocks);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  return order;
}

struct RatPagedCase {
  int64_t dim, heads, groups, chunk, block_size;
};

class RatPagedTest : public ::testing::TestWithParam<RatPagedCase> {
 protected:
  RatPagedDims Dims(int64_t width) const {
    const RatPagedCase c = GetParam();
    return {c.dim, c.heads, c.groups, c.chunk, c.block_size, width, 10000.0f};
  }
};

TEST_P(RatPagedTest, PrefillPassesMatchTheReference) {
  const int64_t tokens = 61;
  const RatPagedDims dims = Dims(40);
  const int64_t d = dims.dim, w = dims.proj_width();
  const float scale = 1.0f / std::sqrt(static_cast<float>(dims.head_dim()));
  const std::vector<float> proj =
      RandomVector(tokens * w, RatPagedSeed(), 2.0f);
  const std::vector<float> bias = RandomVector(d, RatPagedSeed() + 1);
  const std::vector<double> want = RefRat(proj, tokens, bias, dims, scale);
  const std::vector<int32_t> table = ShuffledBlocks(dims.table_width, 5);
  // Slot 1 of 3; the pool holds every chunk of the sequence.
  const int32_t slot[] = {1};
  std::vector<float> open(3 * 2 * d, 0.0f);
  std::vector<float> closed(dims.table_width * dims.block_size * 2 * d, 0.0f);
  std::vector<float> got;
  testing::ForEachThreadCount([&](int) {
    std::fill(open.begin(), open.end(), 0.0f);
    got.clear();
    int64_t start = 0;
    for (int64_t pass : {5, 1, 30, 25}) {  // passes that start mid-chunk
      std::vector<float> q(pass * d), k(pass * d), v(pass * d), z(pass * d),
          y(pass * d);
      const PagedRows rows{pass, start, {}};
      ASSERT_OK(RatChunkScan(absl::MakeConstSpan(proj).subspan(start * w), w,
                             bias, rows, slot, dims, table,
                             absl::MakeSpan(open), absl::MakeSpan(closed),
                             absl::MakeSpan(q), absl::MakeSpan(k),
                             absl::MakeSpan(v), absl::MakeSpan(z)));
      ASSERT_OK(RatPagedAttention(q, k, v, z, rows, dims, table, closed, scale,
                                  absl::MakeSpan(y)));
      got.insert(got.end(), y.begin(), y.end());
      start += pass;
    }
    ExpectClose(got, want, 1e-5, 1e-4, "prefill");
  });
  // The other slots' open states are untouched.
  for (int64_t j = 0; j < 2 * d; ++j) {
    ASSERT_EQ(open[j], 0.0f);
    ASSERT_EQ(open[4 * d + j], 0.0f);
  }
}

TEST_P(RatPagedTest, BatchedStepsMatchTheReference) {
  const RatPagedDims dims = Dims(8);
  const int64_t d = dims.dim, w = dims.proj_width(), l = dims.chunk_size;
  const float scale = 0.4f;
  // Sequences that have read l-2, l-1 (the step closes a chunk), l (it
  // opens one), 0 and 3l+1 tokens; each read in one prefill pass, then
  // three steps of all of them at once.
  const std::vector<int64_t> read{std::max<int64_t>(l - 2, 2), l - 1, l, 0,
                                  3 * l + 1};
  const int64_t n = static_cast<int64_t>(read.size());
  const int64_t steps = 3;
  const std::vector<float> bias = RandomVector(d, RatPagedSeed() + 2);
  std::vector<std::vector<float>> proj;
  std::vector<int32_t> table;
  const std::vector<int32_t> blocks = ShuffledBlocks(n * dims.table_width, 9);
  for (int64_t s = 0; s < n; ++s) {
    proj.push_back(
        RandomVector((read[s] + steps) * w, RatPagedSeed() + 10 + s, 2.0f));
    table.insert(table.end(), blocks.begin() + s * dims.table_width,
                 blocks.begin() + (s + 1) * dims.table_width);
  }
  std::vector<int32_t> slots(n);
  std::iota(slots.begin(), slots.end(), 0);
  std::reverse(slots.begin(), slots.end());  // row r in slot n - 1 - r
  std::vector<float> open(n * 2 * d, 0.0f);
  std::vector<float> closed(n * dims.table_width * dims.block_size * 2 * d);
  for (int64_t s = 0; s < n; ++s) {
    if (read[s] == 0) continue;
    std::vector<float> q(read[s] * d), k(q.size()), v(q.size()), z(q.size());
    const int32_t one[] = {slots[s]};
    ASSERT_OK(RatChunkScan(
        proj[s], w, bias, PagedRows{read[s], 0, {}}, one, dims,
        absl::MakeConstSpan(table).subspan(s * dims.table_width,
                                           dims.table_width),
        absl::MakeSpan(open), absl::MakeSpan(closed), absl::MakeSpan(q),
        absl::MakeSpan(k), absl::MakeSpan(v), absl::MakeSpan(z)));
  }
  std::vector<int64_t> positions = read;
  for (int64_t step = 0; step < steps; ++step) {
    SCOPED_TRACE(step);
    std::vector<float> x(n * w), q(n * d), k(n * d), v(n * d), z(n * d),
        y(n * d);
    for (int64_t s = 0; s < n; ++s) {
      std::copy_n(proj[s].begin() + positions[s] * w, w, x.begin() + s * w);
    }
    const PagedRows rows{n, 0, positions};
    ASSERT_OK(RatChunkScan(x, w, bias, rows, slots, dims, table,
                           absl::MakeSpan(open), absl::MakeSpan(closed),
                           absl::MakeSpan(q), absl::MakeSpan(k),
                           absl::MakeSpan(v), absl::MakeSpan(z)));
    ASSERT_OK(RatPagedAttention(q, k, v, z, rows, dims, table, closed, scale,
                                absl::MakeSpan(y)));
    std::vector<double> want;
    for (int64_t s = 0; s < n; ++s) {
      const std::vector<double> all =
          RefRat(proj[s], positions[s] + 1, bias, dims, scale);
      want.insert(want.end(), all.end() - d, all.end());
    }
    ExpectClose(y, want, 1e-5, 1e-4, "step");
    for (int64_t& p : positions) ++p;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RatPagedTest,
                         ::testing::Values(RatPagedCase{64, 4, 2, 8, 4},
                                           RatPagedCase{128, 2, 1, 5, 3},
                                           RatPagedCase{32, 4, 4, 1, 2}));

TEST(RatPagedChecks, BadInputWritesNothing) {
  const RatPagedDims dims{16, 2, 1, 4, 2, 2, 10000.0f};
  const int64_t d = 16, w = dims.proj_width();
  const std::vector<float> proj = RandomVector(4 * w, 3);
  const std::vector<float> bias(d, 0.0f);
  std::vector<float> open(2 * 2 * d, 1.0f);
  std::vector<float> closed(2 * 2 * 2 * d, 2.0f);
  std::vector<float> q(4 * d, 7.0f), k = q, v = q, z = q;
  const std::vector<float> open0 = open, closed0 = closed, q0 = q;
  const std::vector<int32_t> table{1, -1};
  const int32_t slot[] = {0};
  const int32_t bad_slot[] = {2};
  auto scan = [&](const PagedRows& rows, absl::Span<const int32_t> slots,
                  absl::Span<const int32_t> t) {
    return RatChunkScan(proj, w, bias, rows, slots, dims, t,
                        absl::MakeSpan(open), absl::MakeSpan(closed),
                        absl::MakeSpan(q), absl::MakeSpan(k), absl::MakeSpan(v),
                        absl::MakeSpan(z));
  };
  // Tokens 8..11 close chunk 2, whose block (entry 1) is -1.
  EXPECT_TRUE(absl::IsInvalidArgument(scan(PagedRows{4, 8, {}}, slot, table)));
  EXPECT_TRUE(
      absl::IsInvalidArgument(scan(PagedRows{4, 0, {}}, bad_slot, table)));
  const std::vector<int32_t> past_pool{5, -1};
  EXPECT_TRUE(
      absl::IsInvalidArgument(scan(PagedRows{4, 0, {}}, slot, past_pool)));
  // Table rows for a step: one per row.
  const std::vector<int64_t> positions{0, 1, 2, 3};
  const int32_t four[] = {0, 1, 0, 1};  // repeated slots
  const std::vector<int32_t> tables(8, 0);
  EXPECT_TRUE(
      absl::IsInvalidArgument(scan(PagedRows{4, 0, positions}, four, tables)));
  std::vector<float> y(4 * d, 3.0f);
  EXPECT_TRUE(absl::IsInvalidArgument(
      RatPagedAttention(q, k, v, z, PagedRows{4, 8, {}}, dims, table, closed,
                        1.0f, absl::MakeSpan(y))));
  EXPECT_EQ(open, open0);
  EXPECT_EQ(closed, closed0);
  EXPECT_EQ(q, q0);
  EXPECT_EQ(y, std::vector<float>(4 * d, 3.0f));
}

}  // namespace
}  // namespace twice::kernels
