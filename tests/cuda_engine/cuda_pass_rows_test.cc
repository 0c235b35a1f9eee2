// The CUDA executor device's row form of a prefill pass of several short
// reads against the CPU device reading them segment by segment: full
// attention's rotary, cache write and paged attention over the pass's
// rows in one call each (ResidentPass::row_map), and RAT's chunk scan over
// the pass's segments in one launch. Fresh random inputs (seed printed by
// the test utilities), reads in scattered slots of a pool. SKIPPED without
// a GPU.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/executor/executor_device.h"
#include "gtest/gtest.h"
#include "kernels/paged_attention.h"
#include "kernels/rat_paged.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda_engine/pass_devices_fixture.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using kernels::cuda::testing::kF32Tolerance;
using kernels::cuda::testing::Random;
using kernels::cuda::testing::RelativeError;
using pass_testing::kScatteredSlots;
using pass_testing::kSlots;
using pass_testing::Pair;
using pass_testing::RowTable;

class CudaPassRowsTest : public pass_testing::PassDevicesTest {
 protected:
  // RatChunkScanSegments against the CPU's per-read scan, for reads that
  // continue an open chunk, close chunks and span several, in scattered
  // slots with carried open states; dims.table_width blocks per read.
  void ExpectRatScanMatches(const kernels::RatPagedDims& dims);
};

// Full attention's row form (ResidentPass::row_map): a pass of short
// reads as rows, each at its position in its own copy of its sequence's
// block list, rotated, written and attended in one call each on CUDA,
// against the CPU device reading the same reads segment by segment
// (RopeRotateHalf, PagedKvWrite and PagedAttention of a prefill). The
// caches hold random keys and values before each read's start.
TEST_F(CudaPassRowsTest, PagedAttentionAsRowsMatchesTheCpuBySegments) {
  const std::vector<int64_t> lengths = {5, 1, 13, 7, 2};
  const std::vector<int64_t> starts = {0, 9, 3, 20, 31};
  const kernels::PagedKvDims dims{/*heads=*/4, /*kv_heads=*/2,
                                  /*head_dim=*/16, /*block_size=*/4,
                                  /*table_width=*/0};
  constexpr int64_t kWidth = 9;  // blocks per sequence: 36 positions
  constexpr float kBase = 10000.0f;
  const int64_t qw = dims.heads * dims.head_dim;
  const int64_t kvw = dims.kv_heads * dims.head_dim;
  const int64_t pool_floats = kSlots * kWidth * dims.block_size * kvw;
  std::vector<int32_t> row_slots;
  std::vector<int64_t> positions;
  for (size_t i = 0; i < lengths.size(); ++i) {
    for (int64_t r = 0; r < lengths[i]; ++r) {
      row_slots.push_back(static_cast<int32_t>(kScatteredSlots[i]));
      positions.push_back(starts[i] + r);
    }
  }
  const std::vector<int32_t> row_table = RowTable(lengths, kWidth);
  const int64_t rows = static_cast<int64_t>(positions.size());
  const Pair q = Put(Random(rows * qw, 40));
  const Pair k = Put(Random(rows * kvw, 41));
  const Pair v = Put(Random(rows * kvw, 42));
  const Pair k_pool = Put(Random(pool_floats, 43));
  const Pair v_pool = Put(Random(pool_floats, 44));
  const Pair y = Put(std::vector<float>(rows * qw, 0.0f), true);
  const float scale = 0.25f;

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceSlotMap> map,
                       cuda_->UploadSlotMap(row_slots, positions));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceBlockTable> table,
                       cuda_->UploadBlockTable(row_table, kWidth));
  const DevicePassRows as_rows{rows, 0, map.get()};
  ASSERT_OK(cuda_->RopeRotateHalfAt(q.cuda->floats(), qw, dims.heads,
                                    dims.head_dim, *map, kBase));
  ASSERT_OK(cuda_->RopeRotateHalfAt(k.cuda->floats(), kvw, dims.kv_heads,
                                    dims.head_dim, *map, kBase));
  ASSERT_OK(cuda_->PagedKvWrite(k.cuda->floats(), kvw, v.cuda->floats(), kvw,
                                as_rows, dims, *table, k_pool.cuda->floats(),
                                v_pool.cuda->floats()));
  ASSERT_OK(cuda_->PagedAttention(q.cuda->floats(), qw, as_rows, dims, *table,
                                  k_pool.cuda->floats(), v_pool.cuda->floats(),
                                  scale, y.cuda->floats()));

  int64_t first = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int64_t n = lengths[i];
    const std::unique_ptr<DeviceBlockTable> own = CpuTableOfSegment(i, kWidth);
    ASSERT_NE(own, nullptr);
    const DeviceFloats seg_q = q.cpu->floats().sub(first * qw, n * qw);
    const DeviceFloats seg_k = k.cpu->floats().sub(first * kvw, n * kvw);
    const DeviceFloats seg_v = v.cpu->floats().sub(first * kvw, n * kvw);
    const DevicePassRows segment{n, starts[i], nullptr};
    ASSERT_OK(cpu_->RopeRotateHalf(seg_q, n, qw, dims.heads, dims.head_dim,
                                   starts[i], kBase));
    ASSERT_OK(cpu_->RopeRotateHalf(seg_k, n, kvw, dims.kv_heads, dims.head_dim,
                                   starts[i], kBase));
    ASSERT_OK(cpu_->PagedKvWrite(seg_k, kvw, seg_v, kvw, segment, dims, *own,
                                 k_pool.cpu->floats(), v_pool.cpu->floats()));
    ASSERT_OK(cpu_->PagedAttention(
        seg_q, qw, segment, dims, *own, k_pool.cpu->floats(),
        v_pool.cpu->floats(), scale, y.cpu->floats().sub(first * qw, n * qw)));
    first += n;
  }
  const auto [got, want] = Get(y);
  EXPECT_LE(RelativeError(got, want), kF32Tolerance);
  const auto [got_keys, want_keys] = Get(k_pool);
  EXPECT_LE(RelativeError(got_keys, want_keys), kF32Tolerance);
  const auto [got_values, want_values] = Get(v_pool);
  EXPECT_EQ(got_values, want_values);  // copies
}

// RAT's chunk scan over a pass's segments in one launch (the row form's
// scan), against the CPU device scanning segment by segment with each
// sequence's own table: reads that continue an open chunk, close chunks
// (written through their table rows) and span several, in scattered slots
// with carried open states.
void CudaPassRowsTest::ExpectRatScanMatches(const kernels::RatPagedDims& dims) {
  const std::vector<int64_t> lengths = {5, 1, 13, 9, 3};
  const std::vector<int64_t> starts = {0, 7, 3, 6, 17};
  const int64_t width = dims.table_width;
  const int64_t d = dims.dim, w = dims.proj_width(), stride = w + 3;
  const int64_t rows = UploadPass(lengths, starts);
  const std::vector<int32_t> row_table = RowTable(lengths, width);
  const int64_t closed_floats = kSlots * width * dims.block_size * 2 * d;
  const Pair proj = Put(Random(rows * stride, 50));
  const Pair bias = Put(Random(d, 51));
  const Pair open = Put(Random(kSlots * 2 * d, 52, 0.5f));
  const Pair closed = Put(Random(closed_floats, 53));
  std::vector<Pair> outputs;
  for (int i = 0; i < 4; ++i) {
    outputs.push_back(Put(std::vector<float>(rows * d, 0.0f), true));
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceBlockTable> table,
                       cuda_->UploadBlockTable(row_table, width));
  ASSERT_OK(cuda_->RatChunkScanSegments(
      proj.cuda->floats(), stride, bias.cuda->floats(), *cuda_segments_, dims,
      *table, open.cuda->floats(), closed.cuda->floats(),
      outputs[0].cuda->floats(), outputs[1].cuda->floats(),
      outputs[2].cuda->floats(), outputs[3].cuda->floats()));
  int64_t first = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int64_t n = lengths[i];
    const std::unique_ptr<DeviceBlockTable> own = CpuTableOfSegment(i, width);
    ASSERT_NE(own, nullptr);
    const auto rows_of = [&](const Pair& p) {
      return p.cpu->floats().sub(first * d, n * d);
    };
    ASSERT_OK(cpu_->RatChunkScan(
        proj.cpu->floats().sub(first * stride, (n - 1) * stride + w), stride,
        bias.cpu->floats(), DevicePassRows{n, starts[i], nullptr},
        static_cast<int32_t>(kScatteredSlots[i]), dims, *own,
        open.cpu->floats(), closed.cpu->floats(), rows_of(outputs[0]),
        rows_of(outputs[1]), rows_of(outputs[2]), rows_of(outputs[3])));
    first += n;
  }
  const std::vector<const Pair*> results = {
      &outputs[0], &outputs[1], &outputs[2], &outputs[3], &open, &closed};
  for (const Pair* p : results) {
    const auto [got, want] = Get(*p);
    EXPECT_LE(RelativeError(got, want), kF32Tolerance);
  }
}

// Positions up to 19: 24 positions in 3 blocks of 2 chunks of 4.
TEST_F(CudaPassRowsTest, RatChunkScanOfSegmentsMatchesTheCpu) {
  ExpectRatScanMatches({/*dim=*/16, /*heads=*/2, /*groups=*/1,
                        /*chunk_size=*/4, /*block_size=*/2,
                        /*table_width=*/3, /*rope_base=*/10000.0f});
}

// Chunks of 2 and D = 128: a read's channel pairs and chunks take more
// than one block of threads, so the kernel's grid-stride loop runs.
TEST_F(CudaPassRowsTest, RatChunkScanOfWideSegmentsMatchesTheCpu) {
  ExpectRatScanMatches({/*dim=*/128, /*heads=*/2, /*groups=*/2,
                        /*chunk_size=*/2, /*block_size=*/2,
                        /*table_width=*/6, /*rope_base=*/10000.0f});
}

}  // namespace
}  // namespace twice::engine
