// RAT over paged closed chunks on CUDA against its CPU twins
// (kernels/rat_paged.h), f32: RatChunkScan then RatPagedAttention on both
// sides, comparing the open states, the closed pools, q/k/v/z and the
// attention output within 1e-5 norm-wise relative; open-state slots and
// pool rows no pass has written must come back bit for bit. Open
// states and pools start random (earlier tokens and closed chunks of every
// sequence), block tables hold shuffled, non-contiguous blocks. Prefill
// passes (D 64 H 4 G 2 and D 128 H 2 G 1, hd 16, 64 and 128, L 8 and 5,
// block_size 4 and 3, from position 0 and from inside a chunk, up to 100
// rows, then a second pass reading what the device wrote) and steps (24
// sequences on distinct shuffled slots, at chunk starts, chunk ends and
// anywhere, three steps in a row). Outputs start as NaN, so a launch that
// did not run fails the comparison. Bad inputs are refused with
// INVALID_ARGUMENT (as the CPU twin refuses them) and write nothing.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/rat_paged.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::cuda::rat_paged_cuda_test {
namespace {

using testing::kF32Tolerance;
using testing::Random;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

// Elements where a and b differ (sizes differing count as all).
int64_t RatMismatches(const std::vector<float>& a,
                      const std::vector<float>& b) {
  if (a.size() != b.size()) return static_cast<int64_t>(a.size() + b.size());
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i] ? 1 : 0;
  return n;
}

bool RatAllNan(const std::vector<float>& x) {
  return std::all_of(x.begin(), x.end(), [](float v) { return std::isnan(v); });
}

// Blocks of closed chunks a sequence at position p needs: chunks
// [0, (p + 1) / L), the ones it sees and the one it may close.
int64_t RatBlocksFor(int64_t p, const RatPagedDims& dims) {
  const int64_t chunks = (p + 1) / dims.chunk_size;
  return (chunks + dims.block_size - 1) / dims.block_size;
}

// Block tables [needed.size(), width]: table row s holds needed[s] blocks
// drawn from a shuffled order of all `blocks`, -1 past them.
std::vector<int32_t> RatShuffledTable(const std::vector<int64_t>& needed,
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

// `got` against `want`: within tolerance where `written`, bit for bit
// elsewhere (`written` has one flag per `unit` floats).
void ExpectWrittenNear(const std::vector<float>& got,
                       const std::vector<float>& want,
                       const std::vector<bool>& written, int64_t unit,
                       const char* what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(static_cast<int64_t>(written.size()) * unit,
            static_cast<int64_t>(want.size()));
  std::vector<float> got_written, want_written;
  int64_t unwritten_mismatches = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (written[i / unit]) {
      got_written.push_back(got[i]);
      want_written.push_back(want[i]);
    } else {
      unwritten_mismatches += got[i] != want[i] ? 1 : 0;
    }
  }
  EXPECT_EQ(unwritten_mismatches, 0);
  TWICE_EXPECT_REL(got_written, want_written, kF32Tolerance);
}

// A pass's rows, host copies (positions empty for a prefill).
struct RatPass {
  int64_t rows = 0;
  int64_t start = 0;
  std::vector<int64_t> positions;
  std::vector<int32_t> slots;
};

// The open states and closed pool, the CPU copy and the device copy, and
// the slots and pool rows some pass has written (where the copies may
// differ by rounding).
struct RatStates {
  std::vector<float> open;
  std::vector<float> closed;
  DeviceBuffer device_open;
  DeviceBuffer device_closed;
  std::vector<bool> open_written;
  std::vector<bool> closed_written;
};

class RatPagedCudaTest : public testing::CudaTest {
 protected:
  RatStates RandomStates(const RatPagedDims& dims, int64_t slots,
                         int64_t blocks, uint32_t salt) {
    RatStates s;
    s.open = Random(slots * 2 * dims.dim, salt);
    s.closed = Random(blocks * dims.block_size * 2 * dims.dim, salt + 1);
    s.device_open = Put(s.open);
    s.device_closed = Put(s.closed);
    s.open_written.assign(slots, false);
    s.closed_written.assign(blocks * dims.block_size, false);
    return s;
  }

  // One pass on both sides: RatChunkScan of random projections, then
  // RatPagedAttention of its outputs; everything compared.
  void ScanThenAttend(const RatPagedDims& dims, const RatPass& pass,
                      const std::vector<int32_t>& table, RatStates& s,
                      uint32_t salt) {
    const int64_t d = dims.dim, n = pass.rows;
    const int64_t stride = dims.proj_width() + 3;
    const float scale = 1.0f / std::sqrt(static_cast<float>(dims.head_dim()));
    const std::vector<float> proj = Random(n * stride, salt, 2.0f);
    const std::vector<float> bias = Random(d, salt + 1);
    const PagedRows host_rows{n, pass.start, pass.positions};
    std::vector<float> q(n * d), k(n * d), v(n * d), z(n * d), out(n * d);
    ASSERT_OK(kernels::RatChunkScan(
        proj, stride, bias, host_rows, pass.slots, dims, table,
        absl::MakeSpan(s.open), absl::MakeSpan(s.closed), absl::MakeSpan(q),
        absl::MakeSpan(k), absl::MakeSpan(v), absl::MakeSpan(z)));
    ASSERT_OK(kernels::RatPagedAttention(q, k, v, z, host_rows, dims, table,
                                         s.closed, scale, absl::MakeSpan(out)));

    DeviceBuffer dproj = Put(proj), dbias = Put(bias), dtable = Put(table),
                 dslots = Put(pass.slots);
    DeviceBuffer dpositions =
        pass.positions.empty() ? DeviceBuffer() : Put(pass.positions);
    const std::vector<float> nans(n * d, kNaN);
    DeviceBuffer dq = Put(nans), dk = Put(nans), dv = Put(nans), dz = Put(nans),
                 dout = Put(nans);
    const DevicePagedRows drows{n, pass.start, pass.positions,
                                dpositions.span<const int64_t>()};
    const DeviceSlotRows dslot_rows{pass.slots, dslots.span<const int32_t>()};
    const DeviceBlockTableView dview{table, dtable.span<const int32_t>()};
    ASSERT_OK(RatChunkScan(
        *stream_, dproj.span<const float>(), stride, dbias.span<const float>(),
        drows, dslot_rows, dims, dview, s.device_open.span<float>(),
        s.device_closed.span<float>(), dq.span<float>(), dk.span<float>(),
        dv.span<float>(), dz.span<float>()));
    ASSERT_OK(RatPagedAttention(
        *stream_, dq.span<const float>(), dk.span<const float>(),
        dv.span<const float>(), dz.span<const float>(), drows, dims, dview,
        s.device_closed.span<const float>(), scale, dout.span<float>()));

    for (const int32_t slot : pass.slots) s.open_written[slot] = true;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t p =
          pass.positions.empty() ? pass.start + r : pass.positions[r];
      if (p % dims.chunk_size != dims.chunk_size - 1) continue;
      const int64_t c = p / dims.chunk_size;
      const int64_t trow = pass.positions.empty() ? 0 : r;
      s.closed_written[table[trow * dims.table_width + c / dims.block_size] *
                           dims.block_size +
                       c % dims.block_size] = true;
    }
    ExpectWrittenNear(Get<float>(s.device_open), s.open, s.open_written, 2 * d,
                      "open");
    ExpectWrittenNear(Get<float>(s.device_closed), s.closed, s.closed_written,
                      2 * d, "closed");
    TWICE_EXPECT_REL(Get<float>(dq), q, kF32Tolerance);
    TWICE_EXPECT_REL(Get<float>(dk), k, kF32Tolerance);
    TWICE_EXPECT_REL(Get<float>(dv), v, kF32Tolerance);
    TWICE_EXPECT_REL(Get<float>(dz), z, kF32Tolerance);
    TWICE_EXPECT_REL(Get<float>(dout), out, kF32Tolerance);
  }
};

TEST_F(RatPagedCudaTest, PrefillMatchesCpu) {
  struct Case {
    int64_t dim, heads, groups, chunk_size, block_size, start, rows;
  };
  // From 0 and from inside a chunk (the open state carried), a pass inside
  // one chunk, one closing its first chunk at its first row, one ending on
  // a chunk's last row; hd 16 leaves lanes idle, 128 gives every lane four.
  // Passes of 16 rows or more stage the closed chunks in shared tiles of 32
  // (rat_paged_cuda.cu): the passes of 300 rows see up to 76 chunks, three
  // tiles, the last partial; with chunks of 16 and 32 the first blocks of
  // rows see no closed chunk at all (only their own keys).
  for (const Case c :
       {Case{64, 4, 2, 8, 4, 0, 100}, Case{64, 4, 2, 8, 3, 13, 100},
        Case{128, 2, 1, 8, 3, 13, 100}, Case{128, 2, 1, 8, 4, 0, 5},
        Case{128, 1, 1, 5, 3, 4, 37}, Case{64, 4, 2, 8, 3, 21, 3},
        Case{64, 2, 1, 4, 5, 0, 300}, Case{96, 3, 3, 4, 3, 7, 300},
        Case{64, 4, 2, 16, 4, 0, 40}, Case{128, 2, 2, 32, 3, 0, 48}}) {
    SCOPED_TRACE(::testing::Message()
                 << "D " << c.dim << " H " << c.heads << " G " << c.groups
                 << " L " << c.chunk_size << " block_size " << c.block_size
                 << " start " << c.start << " rows " << c.rows);
    const int64_t more = 11;  // a second pass reading the device's writes
    RatPagedDims dims{c.dim, c.heads, c.groups, c.chunk_size, c.block_size};
    const int64_t needed = RatBlocksFor(c.start + c.rows + more - 1, dims);
    dims.table_width = needed + 1;      // one -1 entry past the last block
    const int64_t blocks = needed + 4;  // blocks no sequence owns
    const std::vector<int32_t> table =
        RatShuffledTable({needed}, dims.table_width, blocks, 1);
    RatStates s = RandomStates(dims, 5, blocks, 2);
    ScanThenAttend(dims, {c.rows, c.start, {}, {3}}, table, s, 10);
    ASSERT_FALSE(HasFatalFailure());
    ScanThenAttend(dims, {more, c.start + c.rows, {}, {3}}, table, s, 11);
  }
}

TEST_F(RatPagedCudaTest, StepsMatchCpu) {
  struct Case {
    int64_t dim, heads, groups, chunk_size, block_size;
  };
  for (const Case c :
       {Case{64, 4, 2, 8, 4}, Case{128, 2, 1, 8, 3}, Case{128, 1, 1, 5, 4}}) {
    SCOPED_TRACE(::testing::Message()
                 << "D " << c.dim << " H " << c.heads << " G " << c.groups
                 << " L " << c.chunk_size << " block_size " << c.block_size);
    const int64_t rows = 24, steps = 3, capacity = 40, l_len = c.chunk_size;
    RatPagedDims dims{c.dim, c.heads, c.groups, l_len, c.block_size};
    // The first sequences start at 0, at chunk ends and starts (the
    // following steps cross them), the others anywhere in [0, 200).
    const int64_t firsts[] = {0,         l_len - 1,     l_len,
                              l_len + 1, 2 * l_len - 2, 2 * l_len - 1,
                              3 * l_len, 5 * l_len - 1};
    std::vector<int64_t> positions(rows);
    std::mt19937 rng(testing::TestSeed() + 3);
    std::uniform_int_distribution<int64_t> anywhere(0, 199);
    for (int64_t r = 0; r < rows; ++r) {
      positions[r] = r < 8 ? firsts[r] : anywhere(rng);
    }
    std::vector<int32_t> slots(capacity);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(rows);
    std::vector<int64_t> needed(rows);
    int64_t total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      needed[r] = RatBlocksFor(positions[r] + steps - 1, dims);
      total += needed[r];
    }
    dims.table_width = *std::max_element(needed.begin(), needed.end()) + 1;
    const int64_t blocks = total + 3;
    const std::vector<int32_t> table =
        RatShuffledTable(needed, dims.table_width, blocks, 4);
    RatStates s = RandomStates(dims, capacity, blocks, 5);
    for (int64_t step = 0; step < steps; ++step) {
      ScanThenAttend(dims, {rows, 0, positions, slots}, table, s,
                     static_cast<uint32_t>(20 + step));
      ASSERT_FALSE(HasFatalFailure());
      for (int64_t& p : positions) ++p;
    }
  }
}

TEST_F(RatPagedCudaTest, BadInputIsRefusedWithoutWrites) {
  // Two sequences at positions 13 and 30 (L 4, block_size 2): 2 and 4
  // blocks of closed chunks in a table of width 5 over 10 blocks; 4 slots.
  const RatPagedDims dims{32, 2, 1, 4, 2, 5};
  const int64_t rows = 2, blocks = 10, capacity = 4, d = dims.dim;
  const int64_t w = dims.proj_width();
  const std::vector<int64_t> positions = {13, 30};
  const std::vector<int32_t> slots = {2, 0};
  const std::vector<int32_t> table = RatShuffledTable({2, 4}, 5, blocks, 6);
  RatStates s = RandomStates(dims, capacity, blocks, 7);
  const std::vector<float> proj = Random(rows * w, 8);
  const std::vector<float> bias = Random(d, 9);
  const std::vector<float> qkvz = Random(rows * d, 10);
  DeviceBuffer dproj = Put(proj), dbias = Put(bias), dqkvz = Put(qkvz),
               dtable = Put(table), dslots = Put(slots),
               dpositions = Put(positions);
  const std::vector<float> nans(rows * d, kNaN);
  DeviceBuffer dq = Put(nans), dk = Put(nans), dv = Put(nans), dz = Put(nans),
               dout = Put(nans);
  const DevicePagedRows drows{rows, 0, positions,
                              dpositions.span<const int64_t>()};
  const DeviceSlotRows good_slots{slots, dslots.span<const int32_t>()};
  const DeviceBlockTableView good{table, dtable.span<const int32_t>()};
  const DeviceSpan<float> open = s.device_open.span<float>();
  const DeviceSpan<float> closed = s.device_closed.span<float>();
  const DeviceSpan<const float> in = dqkvz.span<const float>();

  auto scan = [&](const DevicePagedRows& r, const DeviceSlotRows& sl,
                  const RatPagedDims& dm, const DeviceBlockTableView& t,
                  int64_t stride, DeviceSpan<const float> b,
                  DeviceSpan<float> o, DeviceSpan<float> cl,
                  DeviceSpan<float> zo) {
    return RatChunkScan(*stream_, dproj.span<const float>(), stride, b, r, sl,
                        dm, t, o, cl, dq.span<float>(), dk.span<float>(),
                        dv.span<float>(), zo);
  };
  auto scan_rows = [&](const DevicePagedRows& r, const DeviceSlotRows& sl,
                       const DeviceBlockTableView& t) {
    return scan(r, sl, dims, t, w, dbias.span<const float>(), open, closed,
                dz.span<float>())
        .code();
  };
  auto attend = [&](const DevicePagedRows& r, const RatPagedDims& dm,
                    const DeviceBlockTableView& t, DeviceSpan<const float> q,
                    DeviceSpan<const float> cl, DeviceSpan<float> o) {
    return RatPagedAttention(*stream_, q, in, in, in, r, dm, t, cl, 0.25f, o)
        .code();
  };
  auto cpu_scan = [&](const PagedRows& r, absl::Span<const int32_t> sl,
                      absl::Span<const int32_t> t) {
    std::vector<float> o = s.open, cl = s.closed, q(rows * d), k(rows * d),
                       v(rows * d), z(rows * d);
    return kernels::RatChunkScan(proj, w, bias, r, sl, dims, t,
                                 absl::MakeSpan(o), absl::MakeSpan(cl),
                                 absl::MakeSpan(q), absl::MakeSpan(k),
                                 absl::MakeSpan(v), absl::MakeSpan(z))
        .code();
  };
  // Unbroken, the input is fine: each case below breaks one thing.
  EXPECT_EQ(cpu_scan({rows, 0, positions}, slots, table),
            absl::StatusCode::kOk);

  // Slots: repeated, out of range, negative, one short; the device copy of
  // another size.
  for (const std::vector<int32_t>& bad :
       {std::vector<int32_t>{1, 1}, std::vector<int32_t>{0, 4},
        std::vector<int32_t>{-1, 0}, std::vector<int32_t>{0}}) {
    DeviceBuffer dbad = Put(bad);
    EXPECT_EQ(scan_rows(drows, {bad, dbad.span<const int32_t>()}, good),
              kInvalid);
    EXPECT_EQ(cpu_scan({rows, 0, positions}, bad, table), kInvalid);
  }
  EXPECT_EQ(
      scan_rows(drows, {slots, dslots.span<const int32_t>().subspan(0, 1)},
                good),
      kInvalid);
  // A prefill pass with a slot per row.
  {
    const DevicePagedRows prefill{rows, 13, {}, {}};
    const DeviceBlockTableView first_row{
        absl::MakeConstSpan(table).subspan(0, 5),
        dtable.span<const int32_t>().subspan(0, 5)};
    EXPECT_EQ(scan_rows(prefill, good_slots, first_row), kInvalid);
    // ... and one handed device positions.
    const DevicePagedRows with_positions{
        rows, 13, {}, dpositions.span<const int64_t>()};
    const DeviceSlotRows one{absl::MakeConstSpan(slots).subspan(0, 1),
                             dslots.span<const int32_t>().subspan(0, 1)};
    EXPECT_EQ(scan_rows(with_positions, one, first_row), kInvalid);
    EXPECT_EQ(
        attend(with_positions, dims, first_row, in, closed, dout.span<float>()),
        kInvalid);
  }
  // A reached table entry outside [0, blocks) or -1.
  for (const int32_t bad : {static_cast<int32_t>(blocks), -1}) {
    std::vector<int32_t> broken = table;
    broken[5 + 3] = bad;  // sequence 1, block 3 (position 30 sees chunk 6)
    DeviceBuffer dbroken = Put(broken);
    const DeviceBlockTableView view{broken, dbroken.span<const int32_t>()};
    EXPECT_EQ(scan_rows(drows, good_slots, view), kInvalid);
    EXPECT_EQ(attend(drows, dims, view, in, closed, dout.span<float>()),
              kInvalid);
    EXPECT_EQ(cpu_scan({rows, 0, positions}, slots, broken), kInvalid);
  }
  // A position past the table's width (5 blocks of 2 chunks: 39 closes
  // chunk 9, the last; 43 closes chunk 10).
  {
    const std::vector<int64_t> far = {13, 43};
    DeviceBuffer dfar = Put(far);
    const DevicePagedRows r{rows, 0, far, dfar.span<const int64_t>()};
    EXPECT_EQ(scan_rows(r, good_slots, good), kInvalid);
    EXPECT_EQ(attend(r, dims, good, in, closed, dout.span<float>()), kInvalid);
  }
  // Device copies of the table and positions of another size.
  {
    const DeviceBlockTableView short_table{
        table, dtable.span<const int32_t>().subspan(0, 9)};
    EXPECT_EQ(scan_rows(drows, good_slots, short_table), kInvalid);
    EXPECT_EQ(attend(drows, dims, short_table, in, closed, dout.span<float>()),
              kInvalid);
    const DevicePagedRows short_positions{
        rows, 0, positions, dpositions.span<const int64_t>().subspan(0, 1)};
    EXPECT_EQ(scan_rows(short_positions, good_slots, good), kInvalid);
    EXPECT_EQ(
        attend(short_positions, dims, good, in, closed, dout.span<float>()),
        kInvalid);
  }
  // Scan sizes: proj_stride below the width, proj short, gate_bias, z_out,
  // open not whole slots, closed not whole blocks.
  const DeviceSpan<const float> b = dbias.span<const float>();
  EXPECT_EQ(scan(drows, good_slots, dims, good, w - 1, b, open, closed,
                 dz.span<float>())
                .code(),
            kInvalid);
  {
    DeviceBuffer short_proj = Put(Random(rows * w - 1, 11));
    EXPECT_EQ(
        RatChunkScan(*stream_, short_proj.span<const float>(), w, b, drows,
                     good_slots, dims, good, open, closed, dq.span<float>(),
                     dk.span<float>(), dv.span<float>(), dz.span<float>())
            .code(),
        kInvalid);
  }
  EXPECT_EQ(scan(drows, good_slots, dims, good, w, b.subspan(0, d - 1), open,
                 closed, dz.span<float>())
                .code(),
            kInvalid);
  EXPECT_EQ(scan(drows, good_slots, dims, good, w, b, open, closed,
                 dz.span<float>().subspan(0, d))
                .code(),
            kInvalid);
  EXPECT_EQ(scan(drows, good_slots, dims, good, w, b,
                 open.subspan(0, open.size - 1), closed, dz.span<float>())
                .code(),
            kInvalid);
  EXPECT_EQ(scan(drows, good_slots, dims, good, w, b, open,
                 closed.subspan(0, closed.size - 2 * d), dz.span<float>())
                .code(),
            kInvalid);
  // Dims: G not dividing H, an odd head_dim.
  EXPECT_EQ(scan(drows, good_slots, RatPagedDims{32, 2, 3, 4, 2, 5}, good, w, b,
                 open, closed, dz.span<float>())
                .code(),
            kInvalid);
  EXPECT_EQ(attend(drows, RatPagedDims{30, 2, 1, 4, 2, 5}, good, in, closed,
                   dout.span<float>()),
            kInvalid);
  // Attention sizes: q short, out of the wrong size.
  EXPECT_EQ(attend(drows, dims, good, in.subspan(0, rows * d - 1), closed,
                   dout.span<float>()),
            kInvalid);
  EXPECT_EQ(
      attend(drows, dims, good, in, closed, dout.span<float>().subspan(0, d)),
      kInvalid);
  // head_dim 130 (the CPU takes it, the warp kernel does not) over inputs
  // and a pool of its size.
  {
    const RatPagedDims wide{130, 1, 1, 4, 2, 5};
    DeviceBuffer wide_pool = Zeros<float>(blocks * 2 * 2 * 130);
    DeviceBuffer wide_in = Zeros<float>(rows * 130);
    DeviceBuffer wide_out = Put(std::vector<float>(rows * 130, kNaN));
    const DeviceSpan<const float> wi = wide_in.span<const float>();
    EXPECT_EQ(RatPagedAttention(*stream_, wi, wi, wi, wi, drows, wide, good,
                                wide_pool.span<const float>(), 0.25f,
                                wide_out.span<float>())
                  .code(),
              kInvalid);
    EXPECT_TRUE(RatAllNan(Get<float>(wide_out)));
  }
  // Nothing was written: the states as they were, the outputs all NaN.
  EXPECT_EQ(RatMismatches(Get<float>(s.device_open), s.open), 0);
  EXPECT_EQ(RatMismatches(Get<float>(s.device_closed), s.closed), 0);
  for (const DeviceBuffer* out : {&dq, &dk, &dv, &dz, &dout}) {
    EXPECT_TRUE(RatAllNan(Get<float>(*out)));
  }
}

}  // namespace
}  // namespace twice::kernels::cuda::rat_paged_cuda_test
