// The paged KV cache kernels (kernels/paged_attention.h) against a float64
// reference computed on each sequence's keys and values held contiguously:
// a prefill pass after past tokens, a batched step over sequences at
// different positions (block boundaries included), block tables with
// shuffled, non-contiguous blocks and block sizes 16 and 5, grouped heads.
// RopeRotateHalfAt against the consecutive-position op row by row. Bad
// input is refused before anything is written.
//
// Seeds: fixed by default, TWICE_KERNEL_TEST_SEED picks another; printed.
#include "kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/rope.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels {
namespace {

using testing::ExpectClose;
using testing::RandomVector;

uint32_t PagedSeed() {
  static const uint32_t seed = [] {
    const char* env = std::getenv("TWICE_KERNEL_TEST_SEED");
    const uint32_t s =
        env != nullptr ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10))
                       : 20261206u;
    std::printf("paged attention seed %u\n", s);
    return s;
  }();
  return seed;
}

// Sequences whose caches live in one pool: per sequence its contiguous keys
// and values (the reference's view) and its block table row.
struct PagedFixture {
  PagedKvDims dims;
  int64_t pool_blocks = 0;
  std::vector<float> k_pool, v_pool;
  std::vector<std::vector<int32_t>> tables;      // one row of `width` per seq
  std::vector<std::vector<float>> keys, values;  // [T_s, H_kv, hd]

  int64_t kv_row() const { return dims.kv_heads * dims.head_dim; }

  // Sequences of `lengths` tokens; blocks handed out in a shuffled order.
  PagedFixture(const PagedKvDims& d, const std::vector<int64_t>& lengths,
               uint32_t seed)
      : dims(d) {
    pool_blocks = 0;
    for (int64_t n : lengths) pool_blocks += (n + d.block_size) / d.block_size;
    pool_blocks += 3;  // blocks nobody owns
    k_pool.assign(pool_blocks * d.block_size * kv_row(), 0.0f);
    v_pool = k_pool;
    std::vector<int32_t> order(pool_blocks);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(seed));
    size_t next = 0;
    for (size_t s = 0; s < lengths.size(); ++s) {
      std::vector<int32_t> row(d.table_width, -1);
      // Room for the sequence's tokens and one more (the step's).
      for (int64_t b = 0; b <= lengths[s] / d.block_size; ++b) {
        row[b] = order[next++];
      }
      tables.push_back(row);
      keys.push_back(RandomVector(lengths[s] * kv_row(), seed + 11 * s + 1));
      values.push_back(RandomVector(lengths[s] * kv_row(), seed + 11 * s + 2));
    }
  }

  // Writes sequence s's tokens [begin, end) with the prefill form.
  void Write(size_t s, int64_t begin, int64_t end) {
    const PagedRows rows{end - begin, begin, {}};
    const int64_t r = kv_row();
    ASSERT_OK(PagedKvWrite(
        absl::MakeConstSpan(keys[s]).subspan(begin * r, (end - begin) * r), r,
        absl::MakeConstSpan(values[s]).subspan(begin * r, (end - begin) * r), r,
        rows, dims, tables[s], absl::MakeSpan(k_pool), absl::MakeSpan(v_pool)));
  }

  // float64 attention of query q [H, hd] at position p of sequence s.
  std::vector<double> Reference(size_t s, const float* q, int64_t p,
                                float scale) const {
    const int64_t h = dims.heads, hd = dims.head_dim;
    const int64_t group = h / dims.kv_heads;
    std::vector<double> out(h * hd, 0.0);
    for (int64_t head = 0; head < h; ++head) {
      const int64_t kvh = head / group;
      std::vector<double> sc(p + 1);
      double m = -INFINITY;
      for (int64_t j = 0; j <= p; ++j) {
        double dot = 0.0;
        for (int64_t e = 0; e < hd; ++e) {
          dot +=
              double{q[head * hd + e]} * keys[s][j * kv_row() + kvh * hd + e];
        }
        sc[j] = dot * scale;
        m = std::max(m, sc[j]);
      }
      double sum = 0.0;
      for (double& x : sc) sum += (x = std::exp(x - m));
      for (int64_t j = 0; j <= p; ++j) {
        for (int64_t e = 0; e < hd; ++e) {
          out[head * hd + e] +=
              sc[j] / sum * values[s][j * kv_row() + kvh * hd + e];
        }
      }
    }
    return out;
  }
};

struct PagedCase {
  int64_t heads, kv_heads, head_dim, block_size;
};

class PagedAttentionTest : public ::testing::TestWithParam<PagedCase> {};

void PrefillAfterPastTokens(const PagedCase& c, int64_t tokens) {
  const int64_t past = 37;
  const PagedKvDims dims{c.heads, c.kv_heads, c.head_dim, c.block_size,
                         (past + tokens) / c.block_size + 2};
  PagedFixture f(dims, {past + tokens, 9}, PagedSeed());
  f.Write(1, 0, 9);  // another sequence shares the pool
  f.Write(0, 0, past);
  f.Write(0, past, past + tokens);  // the pass's own keys first
  const int64_t q_stride = c.heads * c.head_dim + 3;
  const std::vector<float> q =
      RandomVector(tokens * q_stride, PagedSeed() + 100);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  testing::ForEachThreadCount([&](int) {
    std::vector<float> out(tokens * c.heads * c.head_dim);
    ASSERT_OK(PagedCausalAttention(q, q_stride, PagedRows{tokens, past, {}},
                                   dims, f.tables[0], f.k_pool, f.v_pool, scale,
                                   absl::MakeSpan(out)));
    std::vector<double> want;
    for (int64_t i = 0; i < tokens; ++i) {
      const std::vector<double> row =
          f.Reference(0, q.data() + i * q_stride, past + i, scale);
      want.insert(want.end(), row.begin(), row.end());
    }
    ExpectClose(out, want, 1e-6, 1e-5, "prefill");
  });
}

// 70 rows run in tiles (16, 16, 16, 16 and 6 rows over key blocks of 64),
// 9 row by row.
TEST_P(PagedAttentionTest, PrefillAfterPastTokensMatchesTheReference) {
  for (const int64_t tokens : {70, 9}) {
    SCOPED_TRACE(tokens);
    PrefillAfterPastTokens(GetParam(), tokens);
    if (HasFatalFailure()) return;
  }
}

TEST_P(PagedAttentionTest, BatchedStepMatchesTheReference) {
  const PagedCase c = GetParam();
  // Positions before, at and after block boundaries, and a first token.
  const std::vector<int64_t> lengths{c.block_size - 1, c.block_size,
                                     3 * c.block_size + 2, 0, 50};
  // 50 positions, or 3·block_size + 3 (four blocks), whichever is more.
  const PagedKvDims dims{c.heads, c.kv_heads, c.head_dim, c.block_size,
                         std::max<int64_t>(60 / c.block_size + 2, 5)};
  PagedFixture f(dims, lengths, PagedSeed() + 7);
  const int64_t rows = static_cast<int64_t>(lengths.size());
  const int64_t kv_row = f.kv_row();
  // The step's new keys: appended to the reference, written by the step.
  std::vector<float> new_k = RandomVector(rows * kv_row, PagedSeed() + 200);
  std::vector<float> new_v = RandomVector(rows * kv_row, PagedSeed() + 201);
  std::vector<int32_t> table;
  for (int64_t s = 0; s < rows; ++s) {
    if (lengths[s] > 0) f.Write(s, 0, lengths[s]);
    f.keys[s].insert(f.keys[s].end(), new_k.begin() + s * kv_row,
                     new_k.begin() + (s + 1) * kv_row);
    f.values[s].insert(f.values[s].end(), new_v.begin() + s * kv_row,
                       new_v.begin() + (s + 1) * kv_row);
    table.insert(table.end(), f.tables[s].begin(), f.tables[s].end());
  }
  const PagedRows step{rows, 0, lengths};
  ASSERT_OK(PagedKvWrite(new_k, kv_row, new_v, kv_row, step, dims, table,
                         absl::MakeSpan(f.k_pool), absl::MakeSpan(f.v_pool)));
  const int64_t qw = c.heads * c.head_dim;
  const std::vector<float> q = RandomVector(rows * qw, PagedSeed() + 202);
  const float scale = 0.3f;
  std::vector<double> want;
  for (int64_t s = 0; s < rows; ++s) {
    const std::vector<double> row =
        f.Reference(s, q.data() + s * qw, lengths[s], scale);
    want.insert(want.end(), row.begin(), row.end());
  }
  // 8 threads for 5 rows: each row's positions split across threads and
  // merged by their maxima; 1 and 2 threads: a row per task.
  testing::ForEachThreadCount([&](int) {
    std::vector<float> out(rows * qw);
    ASSERT_OK(PagedCausalAttention(q, qw, step, dims, table, f.k_pool, f.v_pool,
                                   scale, absl::MakeSpan(out)));
    ExpectClose(out, want, 1e-6, 1e-5, "step");
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionTest,
                         ::testing::Values(PagedCase{8, 2, 16, 16},
                                           PagedCase{4, 4, 64, 5},
                                           PagedCase{6, 3, 32, 1},
                                           // head dims off the 16-lane
                                           // vectors: a tail, only a tail
                                           PagedCase{6, 2, 24, 7},
                                           PagedCase{3, 1, 8, 3},
                                           // runs of 40 positions: value
                                           // chunks of 16, 16 and 8
                                           PagedCase{4, 2, 24, 40}));

TEST(PagedAttentionChecks, BadTablesAndPositionsWriteNothing) {
  const PagedKvDims dims{2, 1, 8, 4, 3};
  PagedFixture f(dims, {6}, PagedSeed() + 9);
  const std::vector<float> k_before = f.k_pool;
  const std::vector<float> k = RandomVector(8 * 8, 1), v = k;
  std::vector<int32_t> table = f.tables[0];
  // Position 12 needs a fourth table entry: past the width.
  EXPECT_TRUE(absl::IsInvalidArgument(
      PagedKvWrite(k, 8, v, 8, PagedRows{1, 12, {}}, dims, table,
                   absl::MakeSpan(f.k_pool), absl::MakeSpan(f.v_pool))));
  // Position 8 reaches the third entry, which is -1 (not owned).
  EXPECT_TRUE(absl::IsInvalidArgument(
      PagedKvWrite(k, 8, v, 8, PagedRows{1, 8, {}}, dims, table,
                   absl::MakeSpan(f.k_pool), absl::MakeSpan(f.v_pool))));
  table[0] = static_cast<int32_t>(f.pool_blocks);  // past the pool
  EXPECT_TRUE(absl::IsInvalidArgument(
      PagedKvWrite(k, 8, v, 8, PagedRows{2, 0, {}}, dims, table,
                   absl::MakeSpan(f.k_pool), absl::MakeSpan(f.v_pool))));
  // A step with a position count that is not one per row.
  const std::vector<int64_t> one_position{0};
  std::vector<float> out(2 * 16);
  EXPECT_TRUE(absl::IsInvalidArgument(PagedCausalAttention(
      k, 16, PagedRows{2, 0, one_position}, dims, f.tables[0], f.k_pool,
      f.v_pool, 1.0f, absl::MakeSpan(out))));
  EXPECT_EQ(f.k_pool, k_before);
}

TEST(RopeRotateHalfAtTest, EachRowEqualsTheOpAtItsPosition) {
  const int64_t heads = 3, hd = 8, stride = heads * hd + 5;
  const std::vector<int64_t> positions{0, 17, 4096, 3};
  const int64_t rows = static_cast<int64_t>(positions.size());
  std::vector<float> x = RandomVector(rows * stride, PagedSeed() + 3);
  std::vector<float> want = x;
  for (int64_t i = 0; i < rows; ++i) {
    ASSERT_OK(RopeRotateHalf(absl::MakeSpan(want).subspan(i * stride, stride),
                             1, stride, heads, hd, positions[i], 10000.0f));
  }
  ASSERT_OK(RopeRotateHalfAt(absl::MakeSpan(x), rows, stride, heads, hd,
                             positions, 10000.0f));
  EXPECT_EQ(x, want);
  const std::vector<int64_t> negative{0, -1, 2, 3};
  EXPECT_TRUE(absl::IsInvalidArgument(RopeRotateHalfAt(
      absl::MakeSpan(x), rows, stride, heads, hd, negative, 10000.0f)));
  EXPECT_EQ(x, want);
}

}  // namespace
}  // namespace twice::kernels
