// The paged KV cache kernels and the per-row rotary embedding on CUDA
// against their CPU twins (kernels/paged_attention.h, kernels/rope.h), f32:
// the pools must come back equal bit for bit (the write is a copy) and the
// outputs within 1e-5 norm-wise relative (1e-2 for the long prefill passes
// that run on the tensor cores in bf16). Pools start with random contents
// (the past tokens of every sequence already cached) and block tables hold
// shuffled, non-contiguous blocks. Prefill passes (H 8, H_kv 2, hd 16, 64,
// 128, block_size 16 and 5, up to 300 rows, then a second chunk that reads
// what the device wrote) and decode steps (64 sequences, positions 0, on
// and across block boundaries, three steps in a row). Outputs start as NaN,
// so a launch that did not run fails the comparison. Bad inputs are
// refused with INVALID_ARGUMENT (as the CPU twin refuses them, where it
// checks the same thing) and write nothing.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/paged_splits.h"
#include "kernels/paged_attention.h"
#include "kernels/rope.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::cuda::paged_attention_cuda_test {
namespace {

using testing::kBf16Tolerance;
using testing::kF32Tolerance;
using testing::Random;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Elements where a and b differ (sizes differing count as all).
int64_t Mismatches(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return static_cast<int64_t>(a.size() + b.size());
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i] ? 1 : 0;
  return n;
}

bool AllNan(const std::vector<float>& x) {
  return std::all_of(x.begin(), x.end(), [](float v) { return std::isnan(v); });
}

// Blocks needed to hold positions [0, p].
int64_t BlocksFor(int64_t p, int64_t block_size) { return p / block_size + 1; }

// Block tables [needed.size(), width]: table row s holds needed[s] blocks
// drawn from a shuffled order of all `blocks`, -1 past them.
std::vector<int32_t> ShuffledTable(const std::vector<int64_t>& needed,
                                   int64_t width, int64_t blocks,
                                   uint32_t salt) {
  std::vector<int32_t> order(static_cast<size_t>(blocks));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(testing::TestSeed() + salt);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int32_t> table(needed.size() * width, -1);
  size_t next = 0;
  for (size_t s = 0; s < needed.size(); ++s) {
    for (int64_t b = 0; b < needed[s]; ++b) {
      table[s * width + b] = order[next++];
    }
  }
  EXPECT_LE(next, order.size());
  return table;
}

// A pool pair, the CPU copy and the device copy.
struct PagedPools {
  std::vector<float> k;
  std::vector<float> v;
  DeviceBuffer device_k;
  DeviceBuffer device_v;
};

class PagedAttentionCudaTest : public testing::CudaTest {
 protected:
  // `blocks` blocks of random keys and values (every position of every
  // sequence "already cached").
  PagedPools RandomPools(const PagedKvDims& dims, int64_t blocks,
                         uint32_t salt) {
    const int64_t n = blocks * dims.block_size * dims.kv_heads * dims.head_dim;
    PagedPools pools;
    pools.k = Random(n, salt);
    pools.v = Random(n, salt + 1);
    pools.device_k = Put(pools.k);
    pools.device_v = Put(pools.v);
    return pools;
  }

  // One pass on both sides: PagedKvWrite of the rows' k and v, then
  // PagedCausalAttention of their q, all three read from one fused row
  // [q | k | v | pad] as an attention layer's projection writes them.
  // `splits` > 1: the attention shares each row's positions among that
  // many warps (paged_splits.h).
  void WriteThenAttend(const PagedKvDims& dims, int64_t rows, int64_t start,
                       const std::vector<int64_t>& positions,
                       const std::vector<int32_t>& table, PagedPools& pools,
                       uint32_t salt, int64_t splits = 1) {
    const int64_t qw = dims.heads * dims.head_dim;
    const int64_t kvw = dims.kv_heads * dims.head_dim;
    const int64_t stride = qw + 2 * kvw + 3;
    const float scale = 1.0f / std::sqrt(static_cast<float>(dims.head_dim));
    const std::vector<float> qkv = Random(rows * stride, salt);
    const absl::Span<const float> all = qkv;
    const PagedRows host_rows{rows, start, positions};
    std::vector<float> out(rows * qw);
    ASSERT_OK(kernels::PagedKvWrite(
        all.subspan(qw), stride, all.subspan(qw + kvw), stride, host_rows, dims,
        table, absl::MakeSpan(pools.k), absl::MakeSpan(pools.v)));
    ASSERT_OK(kernels::PagedCausalAttention(all, stride, host_rows, dims, table,
                                            pools.k, pools.v, scale,
                                            absl::MakeSpan(out)));

    DeviceBuffer dqkv = Put(qkv), dtable = Put(table);
    DeviceBuffer dpositions =
        positions.empty() ? DeviceBuffer() : Put(positions);
    DeviceBuffer dout = Put(std::vector<float>(out.size(), kNaN));
    const DeviceSpan<const float> dall = dqkv.span<const float>();
    const DevicePagedRows drows{rows, start, positions,
                                dpositions.span<const int64_t>()};
    const DeviceBlockTableView dview{table, dtable.span<const int32_t>()};
    ASSERT_OK(PagedKvWrite(*stream_, dall.subspan(qw, dall.size - qw), stride,
                           dall.subspan(qw + kvw, dall.size - qw - kvw), stride,
                           drows, dims, dview, pools.device_k.span<float>(),
                           pools.device_v.span<float>()));
    const int64_t partial_floats =
        PagedSplitFloats(rows, dims.heads, dims.head_dim, splits);
    // NaN partials: a non-empty share the split kernel skipped would carry
    // NaN into the output.
    DeviceBuffer dpartials =
        Put(std::vector<float>(std::max<int64_t>(partial_floats, 1), kNaN));
    const PagedSplit split{splits,
                           dpartials.span<float>().subspan(0, partial_floats)};
    ASSERT_OK(PagedCausalAttention(*stream_, dall, stride, drows, dims, dview,
                                   pools.device_k.span<const float>(),
                                   pools.device_v.span<const float>(), scale,
                                   dout.span<float>(), split));
    EXPECT_EQ(Mismatches(Get<float>(pools.device_k), pools.k), 0);
    EXPECT_EQ(Mismatches(Get<float>(pools.device_v), pools.v), 0);
    // Long prefill passes at head dims 64 and 128 run on the tensor cores.
    const bool tensor_cores =
        positions.empty() && rows >= launch::kPagedFlashMinRows &&
        launch::PagedFlashPrefillSupported(static_cast<int>(dims.head_dim));
    const std::vector<float> got = Get<float>(dout);
    TWICE_EXPECT_REL(got, out, tensor_cores ? kBf16Tolerance : kF32Tolerance);
    if (tensor_cores) {
      // bf16 inputs move random values by ~1e-3, where the f32 kernels
      // stay within 1e-5: the tensor cores ran.
      EXPECT_GT(testing::RelativeError(got, out), kF32Tolerance);
    }
  }
};

TEST_F(PagedAttentionCudaTest, PrefillMatchesCpu) {
  struct Case {
    int64_t head_dim, block_size, start, rows;
  };
  // Past tokens (start > 0) ending inside a block, whole blocks, a single
  // row; hd 16 leaves lanes idle, 128 gives every lane four dims. Passes
  // of 64 rows or more at hd 64 and 128 run on the tensor cores (a last
  // block of 44 rows at 300, of 1 at 2049, 65 rows: one row past a block),
  // other passes of 8 rows or more the tiled prefill kernel, fewer the
  // per-row one.
  for (const Case c :
       {Case{16, 16, 0, 300}, Case{64, 5, 37, 300}, Case{128, 16, 100, 300},
        Case{16, 5, 3, 7}, Case{64, 16, 0, 1}, Case{128, 5, 250, 64},
        Case{64, 16, 0, 2049}, Case{96, 16, 31, 8}, Case{64, 5, 70, 65},
        Case{96, 16, 0, 300}}) {
    SCOPED_TRACE(::testing::Message()
                 << "hd " << c.head_dim << " block_size " << c.block_size
                 << " start " << c.start << " rows " << c.rows);
    const int64_t chunk = 20;  // a second pass reading the device's writes
    const int64_t last = c.start + c.rows + chunk - 1;
    const int64_t needed = BlocksFor(last, c.block_size);
    const int64_t width = needed + 1;   // one -1 entry past the last block
    const int64_t blocks = needed + 5;  // blocks no sequence owns
    const PagedKvDims dims{8, 2, c.head_dim, c.block_size, width};
    const std::vector<int32_t> table =
        ShuffledTable({needed}, width, blocks, 1);
    PagedPools pools = RandomPools(dims, blocks, 2);
    WriteThenAttend(dims, c.rows, c.start, {}, table, pools, 10);
    ASSERT_FALSE(HasFatalFailure());
    WriteThenAttend(dims, chunk, c.start + c.rows, {}, table, pools, 11);
  }
}

TEST_F(PagedAttentionCudaTest, StepsMatchCpu) {
  struct Case {
    int64_t head_dim, block_size;
  };
  for (const Case c : {Case{64, 16}, Case{128, 5}, Case{16, 5}, Case{16, 16}}) {
    SCOPED_TRACE(::testing::Message()
                 << "hd " << c.head_dim << " block_size " << c.block_size);
    const int64_t rows = 64, steps = 3, bs = c.block_size;
    // The first sequences start at 0, on and just before block boundaries
    // (the following steps cross them), the others anywhere in [0, 300).
    std::vector<int64_t> positions(rows);
    const int64_t firsts[] = {0, bs - 1, bs, bs + 1, 2 * bs - 1, 3 * bs + 2};
    std::mt19937 rng(testing::TestSeed() + 3);
    std::uniform_int_distribution<int64_t> anywhere(0, 299);
    for (int64_t r = 0; r < rows; ++r) {
      positions[r] = r < 6 ? firsts[r] : anywhere(rng);
    }
    std::vector<int64_t> needed(rows);
    int64_t total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      needed[r] = BlocksFor(positions[r] + steps - 1, bs);
      total += needed[r];
    }
    const int64_t width = *std::max_element(needed.begin(), needed.end()) + 1;
    const int64_t blocks = total + 3;
    const PagedKvDims dims{8, 2, c.head_dim, bs, width};
    const std::vector<int32_t> table = ShuffledTable(needed, width, blocks, 4);
    PagedPools pools = RandomPools(dims, blocks, 5);
    for (int64_t step = 0; step < steps; ++step) {
      WriteThenAttend(dims, rows, 0, positions, table, pools,
                      static_cast<uint32_t>(20 + step));
      ASSERT_FALSE(HasFatalFailure());
      for (int64_t& p : positions) ++p;
    }
  }
}

// Split passes (flash-decoding): a few rows with long contexts, each
// row's positions shared among 2-128 warps and combined. Positions 0 and
// 1 leave most shares empty; a share boundary falls inside and on block
// edges; prefill passes of fewer than 8 rows split too (the tiled kernel
// takes 8 or more, unsplit).
TEST_F(PagedAttentionCudaTest, SplitPassesMatchCpu) {
  struct Case {
    int64_t head_dim, block_size, splits;
  };
  for (const Case c : {Case{64, 16, 2}, Case{128, 5, 7}, Case{16, 16, 64},
                       Case{96, 16, 128}}) {
    SCOPED_TRACE(::testing::Message()
                 << "hd " << c.head_dim << " block_size " << c.block_size
                 << " splits " << c.splits);
    const int64_t bs = c.block_size;
    std::vector<int64_t> positions = {0, 1, 127, 128, 2999, 4096 + 3};
    std::mt19937 rng(testing::TestSeed() + 30);
    std::uniform_int_distribution<int64_t> anywhere(0, 5000);
    for (int i = 0; i < 4; ++i) positions.push_back(anywhere(rng));
    const int64_t rows = static_cast<int64_t>(positions.size());
    std::vector<int64_t> needed(rows);
    int64_t total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      needed[r] = BlocksFor(positions[r] + 1, bs);
      total += needed[r];
    }
    const int64_t width = *std::max_element(needed.begin(), needed.end());
    const int64_t blocks = total + 2;
    const PagedKvDims dims{8, 2, c.head_dim, bs, width};
    const std::vector<int32_t> table = ShuffledTable(needed, width, blocks, 31);
    PagedPools pools = RandomPools(dims, blocks, 32);
    for (int64_t step = 0; step < 2; ++step) {
      WriteThenAttend(dims, rows, 0, positions, table, pools,
                      static_cast<uint32_t>(40 + step), c.splits);
      ASSERT_FALSE(HasFatalFailure());
      for (int64_t& p : positions) ++p;
    }
    // A prefill pass of 5 rows after 3000 past tokens.
    const int64_t past = 3000, n = 5;
    const int64_t one = BlocksFor(past + n - 1, bs);
    const PagedKvDims prefill_dims{8, 2, c.head_dim, bs, one};
    const std::vector<int32_t> row = ShuffledTable({one}, one, one + 1, 33);
    PagedPools prefill_pools = RandomPools(prefill_dims, one + 1, 34);
    WriteThenAttend(prefill_dims, n, past, {}, row, prefill_pools, 50,
                    c.splits);
  }
}

TEST(PagedSplitsTest, SplitsFillTheDeviceOnlyWhereRowsAreFewAndLong) {
  // 132 multiprocessors: 2112 warps wanted.
  const int64_t want = 132 * kSplitWarpsPerMultiprocessor;
  EXPECT_EQ(PagedAttentionSplits(32, 32768, want), 66);  // one sequence
  EXPECT_EQ(PagedAttentionSplits(32, 1000, want), 8);    // shares of >= 128
  EXPECT_EQ(PagedAttentionSplits(32, 100, want), 1);     // short rows
  EXPECT_EQ(PagedAttentionSplits(64 * 32, 32768, want), 2);
  EXPECT_EQ(PagedAttentionSplits(256 * 32, 32768, want), 1);  // full already
  EXPECT_EQ(PagedAttentionSplits(1, 1 << 30, want), kMaxPagedSplits);
  EXPECT_EQ(PagedAttentionSplits(32, 32768, 0), 1);  // no device count
  EXPECT_EQ(PagedSplitFloats(3, 8, 64, 1), 0);
  EXPECT_EQ(PagedSplitFloats(3, 8, 64, 4), 3 * 8 * 4 * 66);
  // The bound holds for every batch, length and head count.
  for (const int64_t rows : {1, 3, 5, 13, 64, 65, 256}) {
    for (const int64_t heads : {1, 7, 32}) {
      for (const int64_t length : {1, 129, 5000, 1 << 20}) {
        EXPECT_LE(
            PagedSplitFloats(rows, heads, 128,
                             PagedAttentionSplits(rows * heads, length, want)),
            MaxPagedSplitFloats(128, want))
            << rows << " " << heads << " " << length;
      }
    }
  }
}

TEST_F(PagedAttentionCudaTest, RopeAtPositionsMatchesCpu) {
  for (const int64_t head_dim : {16, 64, 128}) {
    SCOPED_TRACE(::testing::Message() << "hd " << head_dim);
    const int64_t rows = 50, heads = 8, stride = heads * head_dim + 8;
    const float base = 10000.0f;
    std::vector<int64_t> positions(rows);
    const int64_t firsts[] = {0, 1, 15, 16, int64_t{1} << 20, 123456789};
    std::mt19937 rng(testing::TestSeed() + 6);
    std::uniform_int_distribution<int64_t> anywhere(0, 4095);
    for (int64_t r = 0; r < rows; ++r) {
      positions[r] = r < 6 ? firsts[r] : anywhere(rng);
    }
    std::vector<float> x = Random(rows * stride, 7);
    DeviceBuffer dx = Put(x), dpositions = Put(positions);
    ASSERT_OK(kernels::RopeRotateHalfAt(absl::MakeSpan(x), rows, stride, heads,
                                        head_dim, positions, base));
    ASSERT_OK(RopeRotateHalfAt(*stream_, dx.span<float>(), rows, stride, heads,
                               head_dim, positions,
                               dpositions.span<const int64_t>(), base));
    // Padding columns past heads · head_dim included: untouched on both.
    TWICE_EXPECT_REL(Get<float>(dx), x, kF32Tolerance);
  }
  EXPECT_OK(RopeRotateHalfAt(*stream_, DeviceSpan<float>{}, 0, 64, 1, 64, {},
                             DeviceSpan<const int64_t>{}, 10000.0f));
}

TEST_F(PagedAttentionCudaTest, BadInputIsRefusedWithoutWrites) {
  // Two sequences at positions 5 and 12 of block_size 4: two and four
  // blocks of a table of width 5 over 10 blocks.
  const PagedKvDims dims{8, 2, 16, 4, 5};
  const int64_t rows = 2, blocks = 10;
  const int64_t qw = dims.heads * dims.head_dim;
  const int64_t kvw = dims.kv_heads * dims.head_dim;
  const std::vector<int64_t> positions = {5, 12};
  const std::vector<int32_t> table = ShuffledTable({2, 4}, 5, blocks, 8);
  PagedPools pools = RandomPools(dims, blocks, 9);
  const std::vector<float> q = Random(rows * qw, 10);
  const std::vector<float> kv = Random(rows * kvw, 11);
  DeviceBuffer dq = Put(q), dkv = Put(kv), dtable = Put(table),
               dpositions = Put(positions);
  DeviceBuffer dout = Put(std::vector<float>(rows * qw, kNaN));
  const DevicePagedRows drows{rows, 0, positions,
                              dpositions.span<const int64_t>()};
  const DeviceSpan<const float> dk = dkv.span<const float>();
  const DeviceSpan<float> k_pool = pools.device_k.span<float>();
  const DeviceSpan<float> v_pool = pools.device_v.span<float>();
  const float scale = 0.25f;

  auto write = [&](const DevicePagedRows& r, const PagedKvDims& d,
                   const DeviceBlockTableView& t, DeviceSpan<const float> k,
                   int64_t stride, DeviceSpan<float> vp) {
    return PagedKvWrite(*stream_, k, stride, k, stride, r, d, t, k_pool, vp);
  };
  auto attend = [&](const DevicePagedRows& r, const PagedKvDims& d,
                    const DeviceBlockTableView& t, int64_t q_stride,
                    DeviceSpan<float> out) {
    return PagedCausalAttention(*stream_, dq.span<const float>(), q_stride, r,
                                d, t, k_pool, v_pool, scale, out);
  };
  auto cpu_write = [&](const PagedRows& r, absl::Span<const int32_t> t,
                       int64_t stride) {
    std::vector<float> kp = pools.k, vp = pools.v;
    return kernels::PagedKvWrite(kv, stride, kv, stride, r, dims, t,
                                 absl::MakeSpan(kp), absl::MakeSpan(vp));
  };
  constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  const DeviceBlockTableView good{table, dtable.span<const int32_t>()};
  // Unbroken, the input is fine: each case below breaks one thing.
  EXPECT_OK(cpu_write({rows, 0, positions}, table, kvw));

  // A table entry outside [0, blocks), and a reached entry of -1.
  for (const int32_t bad : {static_cast<int32_t>(blocks), -1}) {
    std::vector<int32_t> broken = table;
    broken[5 + 2] = bad;  // sequence 1, block 2 (position 12 reaches it)
    DeviceBuffer dbroken = Put(broken);
    const DeviceBlockTableView view{broken, dbroken.span<const int32_t>()};
    EXPECT_EQ(write(drows, dims, view, dk, kvw, v_pool).code(), kInvalid);
    EXPECT_EQ(attend(drows, dims, view, qw, dout.span<float>()).code(),
              kInvalid);
    EXPECT_EQ(cpu_write({rows, 0, positions}, broken, kvw).code(), kInvalid);
  }
  // A position past the table's width (5 blocks of 4: 20 and on).
  {
    const std::vector<int64_t> far = {5, 20};
    DeviceBuffer dfar = Put(far);
    const DevicePagedRows r{rows, 0, far, dfar.span<const int64_t>()};
    EXPECT_EQ(write(r, dims, good, dk, kvw, v_pool).code(), kInvalid);
    EXPECT_EQ(attend(r, dims, good, qw, dout.span<float>()).code(), kInvalid);
    EXPECT_EQ(cpu_write({rows, 0, far}, table, kvw).code(), kInvalid);
  }
  // Device copies that disagree with the host copies in size.
  {
    const DeviceBlockTableView short_table{
        table, dtable.span<const int32_t>().subspan(0, 9)};
    EXPECT_EQ(write(drows, dims, short_table, dk, kvw, v_pool).code(),
              kInvalid);
    EXPECT_EQ(attend(drows, dims, short_table, qw, dout.span<float>()).code(),
              kInvalid);
    const DevicePagedRows short_positions{
        rows, 0, positions, dpositions.span<const int64_t>().subspan(0, 1)};
    EXPECT_EQ(write(short_positions, dims, good, dk, kvw, v_pool).code(),
              kInvalid);
    // A prefill (no host positions, table row 0 only) handed device
    // positions.
    const DevicePagedRows prefill{
        rows, 0, {}, dpositions.span<const int64_t>()};
    const DeviceBlockTableView first_row{
        absl::MakeConstSpan(table).subspan(0, 5),
        dtable.span<const int32_t>().subspan(0, 5)};
    EXPECT_EQ(attend(prefill, dims, first_row, qw, dout.span<float>()).code(),
              kInvalid);
  }
  // Pools of different sizes, a stride below H_kv · hd, k too short.
  EXPECT_EQ(
      write(drows, dims, good, dk, kvw, v_pool.subspan(0, v_pool.size - 1))
          .code(),
      kInvalid);
  EXPECT_EQ(write(drows, dims, good, dk, kvw - 1, v_pool).code(), kInvalid);
  EXPECT_EQ(cpu_write({rows, 0, positions}, table, kvw - 1).code(), kInvalid);
  EXPECT_EQ(
      write(drows, dims, good, dk.subspan(0, dk.size - 1), kvw, v_pool).code(),
      kInvalid);
  // H_kv not dividing H.
  EXPECT_EQ(
      write(drows, PagedKvDims{8, 3, 16, 4, 5}, good, dk, kvw, v_pool).code(),
      kInvalid);
  // Attention: out of the wrong size, q_stride below H · hd, and head_dim
  // 129 (the CPU takes it, the warp kernel does not) over pools of its size.
  EXPECT_EQ(
      attend(drows, dims, good, qw, dout.span<float>().subspan(0, qw)).code(),
      kInvalid);
  EXPECT_EQ(attend(drows, dims, good, qw - 1, dout.span<float>()).code(),
            kInvalid);
  {
    const PagedKvDims wide{2, 1, 129, 4, 5};
    DeviceBuffer wide_pool = Zeros<float>(blocks * 4 * 129);
    DeviceBuffer wide_q = Zeros<float>(rows * 2 * 129);
    DeviceBuffer wide_out = Put(std::vector<float>(rows * 2 * 129, kNaN));
    EXPECT_EQ(PagedCausalAttention(
                  *stream_, wide_q.span<const float>(), 2 * 129, drows, wide,
                  good, wide_pool.span<const float>(),
                  wide_pool.span<const float>(), scale, wide_out.span<float>())
                  .code(),
              kInvalid);
    EXPECT_TRUE(AllNan(Get<float>(wide_out)));
  }
  // Splits out of [1, 128], or partial sums of too few floats.
  {
    const int64_t need = PagedSplitFloats(rows, dims.heads, dims.head_dim, 3);
    DeviceBuffer partials = Zeros<float>(need);
    for (const PagedSplit bad :
         {PagedSplit{0, partials.span<float>()},
          PagedSplit{kMaxPagedSplits + 1, partials.span<float>()},
          PagedSplit{3, partials.span<float>().subspan(0, need - 1)}}) {
      EXPECT_EQ(PagedCausalAttention(*stream_, dq.span<const float>(), qw,
                                     drows, dims, good, k_pool, v_pool, scale,
                                     dout.span<float>(), bad)
                    .code(),
                kInvalid)
          << bad.splits;
    }
  }
  // Rope: a negative position, device positions of the wrong size.
  {
    std::vector<float> x = Random(rows * qw, 12);
    DeviceBuffer dx = Put(x);
    const std::vector<int64_t> negative = {3, -1};
    DeviceBuffer dnegative = Put(negative);
    EXPECT_EQ(RopeRotateHalfAt(*stream_, dx.span<float>(), rows, qw, dims.heads,
                               dims.head_dim, negative,
                               dnegative.span<const int64_t>(), 10000.0f)
                  .code(),
              kInvalid);
    EXPECT_EQ(kernels::RopeRotateHalfAt(absl::MakeSpan(x), rows, qw, dims.heads,
                                        dims.head_dim, negative, 10000.0f)
                  .code(),
              kInvalid);
    EXPECT_EQ(RopeRotateHalfAt(*stream_, dx.span<float>(), rows, qw, dims.heads,
                               dims.head_dim, positions,
                               dpositions.span<const int64_t>().subspan(0, 1),
                               10000.0f)
                  .code(),
              kInvalid);
    EXPECT_EQ(Mismatches(Get<float>(dx), x), 0);
  }
  // Nothing was written: the pools as they were, the output all NaN.
  EXPECT_EQ(Mismatches(Get<float>(pools.device_k), pools.k), 0);
  EXPECT_EQ(Mismatches(Get<float>(pools.device_v), pools.v), 0);
  EXPECT_TRUE(AllNan(Get<float>(dout)));
}

}  // namespace
}  // namespace twice::kernels::cuda::paged_attention_cuda_test
