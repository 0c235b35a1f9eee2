// The CUDA RAT kernels over paged closed chunks replayed on the CPU
// (cuda_replay.h) against their CPU twins (kernels/rat_paged.h), in both
// thread orders: the chunk scan (open states, closed pool, q/k/v/z) and
// the attention over closed chunks, for prefill passes (16 rows or more
// stage the closed chunks in shared tiles, rat_paged_cuda.cu) and steps.
// Open states and pools start random, tables hold shuffled blocks,
// outputs start as NaN.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/cuda/launch.h"
#include "kernels/rat_paged.h"
#include "tests/cuda_replay/replay_test_util.h"

namespace twice::cuda_replay {
namespace {

namespace launch = kernels::cuda::launch;
using kernels::RatPagedDims;
using testing::kF32Tolerance;
using testing::kThreadOrders;
using testing::Random;
using testing::ShuffledTable;

// Blocks of closed chunks a sequence at position p needs: chunks
// [0, (p + 1) / L), the ones it sees and the one it may close.
int64_t BlocksFor(int64_t p, const RatPagedDims& dims) {
  const int64_t chunks = (p + 1) / dims.chunk_size;
  return (chunks + dims.block_size - 1) / dims.block_size;
}

struct RatPass {
  RatPagedDims dims;
  int64_t rows = 0;
  int64_t start = 0;
  std::vector<int64_t> positions;  // empty: a prefill pass
  std::vector<int32_t> slots;
  std::vector<int32_t> table;
};

// The scan then the attention on both sides, from the same open states
// and closed pool; everything compared.
void ScanThenAttend(const RatPass& pass, const std::vector<float>& open,
                    const std::vector<float>& closed, uint32_t salt) {
  const RatPagedDims& dims = pass.dims;
  const int64_t d = dims.dim, n = pass.rows;
  const int64_t stride = dims.proj_width() + 3;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dims.head_dim()));
  const std::vector<float> proj = Random(n * stride, salt, 2.0f);
  const std::vector<float> bias = Random(d, salt + 1);
  const kernels::PagedRows host_rows{n, pass.start, pass.positions};
  std::vector<float> want_open = open, want_closed = closed;
  std::vector<float> q(n * d), k(n * d), v(n * d), z(n * d), out(n * d);
  ASSERT_TRUE(kernels::RatChunkScan(proj, stride, bias, host_rows, pass.slots,
                                    dims, pass.table, absl::MakeSpan(want_open),
                                    absl::MakeSpan(want_closed),
                                    absl::MakeSpan(q), absl::MakeSpan(k),
                                    absl::MakeSpan(v), absl::MakeSpan(z))
                  .ok());
  ASSERT_TRUE(kernels::RatPagedAttention(q, k, v, z, host_rows, dims,
                                         pass.table, want_closed, scale,
                                         absl::MakeSpan(out))
                  .ok());

  launch::RatPagedArgs args;
  args.rows = n;
  args.start = pass.start;
  args.positions = pass.positions.empty() ? nullptr : pass.positions.data();
  args.table = pass.table.data();
  args.table_width = dims.table_width;
  args.block_size = dims.block_size;
  args.chunk_size = dims.chunk_size;
  args.dim = dims.dim;
  args.heads = static_cast<int>(dims.heads);
  args.groups = static_cast<int>(dims.groups);
  args.rope_base = dims.rope_base;
  for (const ThreadOrder order : kThreadOrders) {
    SCOPED_TRACE(order == ThreadOrder::kIncreasing ? "increasing"
                                                   : "decreasing");
    SetThreadOrder(order);
    std::vector<float> got_open = open, got_closed = closed;
    std::vector<float> gq(n * d, NAN), gk(n * d, NAN), gv(n * d, NAN),
        gz(n * d, NAN), got(n * d, NAN);
    ASSERT_EQ(launch::RatChunkScan(args, proj.data(), stride, bias.data(),
                                   pass.slots.data(), got_open.data(),
                                   got_closed.data(), gq.data(), gk.data(),
                                   gv.data(), gz.data(), nullptr),
              cudaSuccess);
    ASSERT_EQ(launch::RatPagedAttention(args, gq.data(), gk.data(), gv.data(),
                                        gz.data(), got_closed.data(), scale,
                                        got.data(), nullptr),
              cudaSuccess);
    TWICE_EXPECT_REPLAY_REL(got_open, want_open, kF32Tolerance);
    TWICE_EXPECT_REPLAY_REL(got_closed, want_closed, kF32Tolerance);
    TWICE_EXPECT_REPLAY_REL(gq, q, kF32Tolerance);
    TWICE_EXPECT_REPLAY_REL(gk, k, kF32Tolerance);
    TWICE_EXPECT_REPLAY_REL(gv, v, kF32Tolerance);
    TWICE_EXPECT_REPLAY_REL(gz, z, kF32Tolerance);
    TWICE_EXPECT_REPLAY_REL(got, out, kF32Tolerance);
  }
}

TEST(RatPagedReplayTest, PrefillMatchesCpu) {
  struct Case {
    int64_t dim, heads, groups, chunk_size, block_size, start, rows;
  };
  // From 0 and from inside a chunk (the open state carried), a pass inside
  // one chunk; passes of 16 rows or more in tiles of 32 closed chunks (the
  // pass of 200 rows sees 50, two tiles, the last partial; with chunks of
  // 16 and 32 the first blocks of rows see no closed chunk at all).
  for (const Case c :
       {Case{64, 4, 2, 8, 3, 13, 100}, Case{128, 2, 1, 8, 4, 0, 5},
        Case{64, 4, 2, 8, 3, 21, 3}, Case{64, 2, 1, 4, 5, 0, 200},
        Case{96, 3, 3, 4, 3, 7, 150}, Case{64, 4, 2, 16, 4, 0, 40},
        Case{128, 2, 2, 32, 3, 0, 48}}) {
    SCOPED_TRACE(::testing::Message()
                 << "D " << c.dim << " H " << c.heads << " G " << c.groups
                 << " L " << c.chunk_size << " block_size " << c.block_size
                 << " start " << c.start << " rows " << c.rows);
    RatPass pass;
    pass.dims = {c.dim, c.heads, c.groups, c.chunk_size, c.block_size};
    const int64_t needed = BlocksFor(c.start + c.rows - 1, pass.dims);
    pass.dims.table_width = needed + 1;  // one -1 entry past the last block
    const int64_t blocks = needed + 4;   // blocks no sequence owns
    pass.rows = c.rows;
    pass.start = c.start;
    pass.slots = {3};
    pass.table = ShuffledTable({needed}, pass.dims.table_width, blocks, 1);
    ScanThenAttend(pass, Random(5 * 2 * c.dim, 2),
                   Random(blocks * c.block_size * 2 * c.dim, 3), 10);
  }
}

TEST(RatPagedReplayTest, StepsMatchCpu) {
  struct Case {
    int64_t dim, heads, groups, chunk_size, block_size;
  };
  for (const Case c :
       {Case{64, 4, 2, 8, 4}, Case{128, 2, 1, 8, 3}, Case{128, 1, 1, 5, 4}}) {
    SCOPED_TRACE(::testing::Message()
                 << "D " << c.dim << " H " << c.heads << " G " << c.groups
                 << " L " << c.chunk_size << " block_size " << c.block_size);
    const int64_t capacity = 20, l_len = c.chunk_size;
    RatPass pass;
    pass.dims = {c.dim, c.heads, c.groups, l_len, c.block_size};
    // At 0, at chunk ends and starts, anywhere.
    pass.positions = {0,         l_len - 1,     l_len,
                      l_len + 1, 2 * l_len - 1, 5 * l_len - 1};
    std::mt19937 rng(testing::TestSeed() + 3);
    std::uniform_int_distribution<int64_t> anywhere(0, 199);
    for (int i = 0; i < 6; ++i) pass.positions.push_back(anywhere(rng));
    pass.rows = static_cast<int64_t>(pass.positions.size());
    std::vector<int32_t> slots(capacity);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(pass.rows);
    pass.slots = slots;
    std::vector<int64_t> needed;
    int64_t total = 0;
    for (const int64_t p : pass.positions) {
      needed.push_back(BlocksFor(p, pass.dims));
      total += needed.back();
    }
    pass.dims.table_width = *std::max_element(needed.begin(), needed.end()) + 1;
    const int64_t blocks = total + 3;
    pass.table = ShuffledTable(needed, pass.dims.table_width, blocks, 4);
    ScanThenAttend(pass, Random(capacity * 2 * c.dim, 5),
                   Random(blocks * c.block_size * 2 * c.dim, 6), 20);
  }
}

}  // namespace
}  // namespace twice::cuda_replay
