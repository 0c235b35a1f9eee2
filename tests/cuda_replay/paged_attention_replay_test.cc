// The CUDA paged KV cache kernels' source replayed on the CPU
// (cuda_replay.h) against their CPU twins (kernels/paged_attention.h), in
// both thread orders: the KV write (pools equal bit for bit), prefill
// passes on the tensor cores (paged_flash_prefill_cuda.cu, 64 rows or more
// at head dims 64 and 128: bf16 tolerance), in shared tiles (8 rows or
// more) and row by row, and decode steps with and without split positions.
// Pools start random (every sequence's past already cached), tables hold
// shuffled blocks, outputs and split partials start as NaN.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/paged_splits.h"
#include "kernels/paged_attention.h"
#include "tests/cuda_replay/replay_test_util.h"

namespace twice::cuda_replay {
namespace {

namespace launch = kernels::cuda::launch;
using kernels::PagedKvDims;
using testing::kBf16Tolerance;
using testing::kF32Tolerance;
using testing::kThreadOrders;
using testing::Random;
using testing::ShuffledTable;

struct Pass {
  PagedKvDims dims;
  int64_t rows = 0;
  int64_t start = 0;
  std::vector<int64_t> positions;  // empty: a prefill pass
  std::vector<int32_t> table;
  int64_t splits = 1;
};

// The pass on both sides: the KV write of the rows' k and v, then the
// attention of their q, read from one fused row [q | k | v | pad].
void WriteThenAttend(const Pass& p, std::vector<float> k_pool,
                     std::vector<float> v_pool, uint32_t salt) {
  const PagedKvDims& dims = p.dims;
  const int64_t qw = dims.heads * dims.head_dim;
  const int64_t kvw = dims.kv_heads * dims.head_dim;
  const int64_t stride = qw + 2 * kvw + 3;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dims.head_dim));
  const std::vector<float> qkv = Random(p.rows * stride, salt);
  const absl::Span<const float> all = qkv;
  std::vector<float> want_k = k_pool, want_v = v_pool;
  std::vector<float> want(p.rows * qw);
  const kernels::PagedRows host_rows{p.rows, p.start, p.positions};
  ASSERT_TRUE(kernels::PagedKvWrite(all.subspan(qw), stride,
                                    all.subspan(qw + kvw), stride, host_rows,
                                    dims, p.table, absl::MakeSpan(want_k),
                                    absl::MakeSpan(want_v))
                  .ok());
  ASSERT_TRUE(kernels::PagedCausalAttention(all, stride, host_rows, dims,
                                            p.table, want_k, want_v, scale,
                                            absl::MakeSpan(want))
                  .ok());

  launch::PagedRowsArgs args;
  args.rows = p.rows;
  args.start = p.start;
  args.positions = p.positions.empty() ? nullptr : p.positions.data();
  args.table = p.table.data();
  args.table_width = dims.table_width;
  args.block_size = dims.block_size;
  args.heads = static_cast<int>(dims.heads);
  args.kv_heads = static_cast<int>(dims.kv_heads);
  args.head_dim = static_cast<int>(dims.head_dim);
  const bool tensor_cores =
      p.positions.empty() && p.rows >= launch::kPagedFlashMinRows &&
      launch::PagedFlashPrefillSupported(static_cast<int>(dims.head_dim));
  for (const ThreadOrder order : kThreadOrders) {
    SCOPED_TRACE(order == ThreadOrder::kIncreasing ? "increasing"
                                                   : "decreasing");
    SetThreadOrder(order);
    std::vector<float> got_k = k_pool, got_v = v_pool;
    std::vector<float> got(p.rows * qw, NAN);
    std::vector<float> partials(
        std::max<int64_t>(1, kernels::cuda::PagedSplitFloats(
                                 p.rows, dims.heads, dims.head_dim, p.splits)),
        NAN);
    ASSERT_EQ(launch::PagedKvWrite(args, qkv.data() + qw, stride,
                                   qkv.data() + qw + kvw, stride, got_k.data(),
                                   got_v.data(), nullptr),
              cudaSuccess);
    ASSERT_EQ(
        launch::PagedCausalAttention(
            args, qkv.data(), stride, got_k.data(), got_v.data(), scale,
            got.data(), static_cast<int>(p.splits), partials.data(), nullptr),
        cudaSuccess);
    EXPECT_EQ(got_k, want_k);
    EXPECT_EQ(got_v, want_v);
    TWICE_EXPECT_REPLAY_REL(got, want,
                            tensor_cores ? kBf16Tolerance : kF32Tolerance);
    if (tensor_cores) {
      // bf16 inputs move random values by ~1e-3, where the f32 kernels
      // stay within 1e-5: the tensor-core form ran.
      EXPECT_GT(::twice::testing::NormRelativeError(got, want), kF32Tolerance);
    }
  }
}

TEST(PagedAttentionReplayTest, PrefillMatchesCpu) {
  struct Case {
    int64_t head_dim, block_size, start, rows;
  };
  // Tensor cores: hd 64 and 128 at 64 rows or more (a last block of 1 row,
  // one row past a block); tiles: 8 rows or more otherwise (hd 16 leaves
  // lanes idle, 96 is not for the tensor cores); fewer rows one by one.
  for (const Case c :
       {Case{64, 5, 37, 150}, Case{128, 16, 100, 64}, Case{64, 16, 0, 129},
        Case{16, 16, 0, 100}, Case{96, 16, 31, 8}, Case{96, 5, 0, 70},
        Case{16, 5, 3, 7}, Case{64, 16, 0, 1}}) {
    SCOPED_TRACE(::testing::Message()
                 << "hd " << c.head_dim << " block_size " << c.block_size
                 << " start " << c.start << " rows " << c.rows);
    const int64_t needed = (c.start + c.rows - 1) / c.block_size + 1;
    const int64_t width = needed + 1;   // one -1 entry past the last block
    const int64_t blocks = needed + 5;  // blocks no sequence owns
    Pass pass;
    pass.dims = {8, 2, c.head_dim, c.block_size, width};
    pass.rows = c.rows;
    pass.start = c.start;
    pass.table = ShuffledTable({needed}, width, blocks, 1);
    const int64_t pool = blocks * c.block_size * 2 * c.head_dim;
    WriteThenAttend(pass, Random(pool, 2), Random(pool, 3), 10);
  }
}

// Where a block may not have the 105 KiB head dim 128 takes on the tensor
// cores (99 KiB on sm_86 / sm_89), long prefill passes run the f32 tiles.
TEST(PagedAttentionReplayTest, HeadDim128PrefillWithoutTheSharedMemory) {
  SetSharedMemoryOptin(99 * 1024);
  EXPECT_FALSE(launch::PagedFlashPrefillSupported(128));
  EXPECT_TRUE(launch::PagedFlashPrefillSupported(64));
  Pass pass;
  const int64_t needed = 70 / 16 + 1;
  pass.dims = {8, 2, 128, 16, needed + 1};
  pass.rows = 70;
  pass.table = ShuffledTable({needed}, needed + 1, needed + 3, 7);
  const int64_t pool = (needed + 3) * 16 * 2 * 128;
  WriteThenAttend(pass, Random(pool, 8), Random(pool, 9), 30);
  SetSharedMemoryOptin(227 * 1024);
}

TEST(PagedAttentionReplayTest, StepsMatchCpu) {
  struct Case {
    int64_t head_dim, block_size, splits;
  };
  // Positions at 0, on and across block boundaries and anywhere; splits
  // share each row's positions among warps (most shares empty at 0 and 1).
  for (const Case c : {Case{64, 16, 1}, Case{128, 5, 1}, Case{16, 5, 1},
                       Case{64, 16, 3}, Case{96, 5, 8}}) {
    SCOPED_TRACE(::testing::Message()
                 << "hd " << c.head_dim << " block_size " << c.block_size
                 << " splits " << c.splits);
    const int64_t bs = c.block_size;
    std::vector<int64_t> positions = {0, 1, bs - 1, bs, 2 * bs + 1, 300};
    std::mt19937 rng(testing::TestSeed() + 3);
    std::uniform_int_distribution<int64_t> anywhere(0, 200);
    for (int i = 0; i < 6; ++i) positions.push_back(anywhere(rng));
    std::vector<int64_t> needed;
    int64_t total = 0;
    for (const int64_t p : positions) {
      needed.push_back(p / bs + 1);
      total += needed.back();
    }
    const int64_t width = *std::max_element(needed.begin(), needed.end()) + 1;
    const int64_t blocks = total + 3;
    Pass pass;
    pass.dims = {8, 2, c.head_dim, bs, width};
    pass.rows = static_cast<int64_t>(positions.size());
    pass.positions = positions;
    pass.table = ShuffledTable(needed, width, blocks, 4);
    pass.splits = c.splits;
    const int64_t pool = blocks * bs * 2 * c.head_dim;
    WriteThenAttend(pass, Random(pool, 5), Random(pool, 6), 20);
  }
}

}  // namespace
}  // namespace twice::cuda_replay
