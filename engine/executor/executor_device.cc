#include "engine/executor/executor_device.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/status_macros.h"

namespace twice::engine {

absl::Status CheckSlotMap(absl::Span<const int32_t> slots,
                          absl::Span<const int64_t> positions) {
  if (slots.size() != positions.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot map: ", slots.size(), " slots and ",
                     positions.size(), " positions; need one per row"));
  }
  for (const int64_t p : positions) {
    if (p < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("slot map: position ", p, " < 0"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBlockTable(absl::Span<const int32_t> table, int64_t width) {
  if (width < 1 || static_cast<int64_t>(table.size()) % width != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("block table: ", table.size(),
                     " entries are not whole rows of width ", width));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> PaddedTableRows(
    const DeviceBlockTable& table, absl::Span<const int32_t> rows,
    int64_t width) {
  TWICE_RETURN_IF_ERROR(CheckBlockTable(rows, width));
  const int64_t to = table.width();
  const int64_t n = static_cast<int64_t>(table.blocks().size()) / to;
  if (static_cast<int64_t>(rows.size()) / width != n || width > to) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FillBlockTable: a table of ", n, " rows of width ", to,
        " cannot take ", rows.size() / width, " rows of width ", width));
  }
  std::vector<int32_t> padded(static_cast<size_t>(n * to), -1);
  for (int64_t r = 0; r < n; ++r) {
    std::copy_n(rows.begin() + r * width, width, padded.begin() + r * to);
  }
  return padded;
}

kernels::PagedKvDims WithTableWidth(kernels::PagedKvDims dims,
                                    const DeviceBlockTable& table) {
  dims.table_width = table.width();
  return dims;
}

kernels::RatPagedDims WithTableWidth(kernels::RatPagedDims dims,
                                     const DeviceBlockTable& table) {
  dims.table_width = table.width();
  return dims;
}

absl::Status CheckStepInputs(int64_t rows, absl::Span<const int32_t> ids,
                             absl::Span<const int32_t> slots,
                             absl::Span<const int64_t> positions,
                             absl::Span<const kernels::SamplingRule> rules) {
  const auto n = static_cast<size_t>(rows);
  if (ids.size() != n || slots.size() != n || rules.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step of ", rows, " rows: ", ids.size(), " ids, ", slots.size(),
        " slots and ", rules.size(), " rules; need one of each per row"));
  }
  TWICE_RETURN_IF_ERROR(CheckSlotMap(slots, positions));
  for (const kernels::SamplingRule& rule : rules) {
    TWICE_RETURN_IF_ERROR(kernels::ValidateSamplingRule(rule));
  }
  return absl::OkStatus();
}

absl::Status CheckMatrixTable(absl::Span<const DeviceMatrix* const> matrices) {
  if (matrices.empty()) {
    return absl::InvalidArgumentError("UploadMatrixTable: no matrices");
  }
  for (const DeviceMatrix* m : matrices) {
    if (m == nullptr || m->rows() != matrices[0]->rows() ||
        m->cols() != matrices[0]->cols()) {
      return absl::InvalidArgumentError(
          "UploadMatrixTable: the matrices must all be of one shape");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckHostCopies(absl::Span<const HostCopy> copies) {
  for (size_t i = 0; i < copies.size(); ++i) {
    const HostCopy& c = copies[i];
    if (static_cast<int64_t>(c.to.size()) != c.from.size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CopyToHost: copy ", i, " of ", copies.size(), " has ", c.from.size,
          " device floats for ", c.to.size(), " host floats"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCopyRows(DeviceFloats src, int64_t src_stride,
                           DeviceFloats dst, int64_t dst_stride, int64_t rows,
                           int64_t cols) {
  if (rows < 0 || cols < 0 || src_stride < cols || dst_stride < cols) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CopyRows: need rows, cols >= 0 and strides >= cols; got rows ", rows,
        ", cols ", cols, ", strides ", src_stride, " and ", dst_stride));
  }
  if (rows == 0 || cols == 0) return absl::OkStatus();
  if (src.size < (rows - 1) * src_stride + cols ||
      dst.size < (rows - 1) * dst_stride + cols) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CopyRows: ", rows, " rows of ", cols, " floats do not fit views of ",
        src.size, " and ", dst.size, " floats"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DevicePassSegments>>
ExecutorDevice::UploadPassSegments(
    absl::Span<const kernels::PassSegment> segments, int64_t rows,
    int64_t slots) {
  TWICE_RETURN_IF_ERROR(
      kernels::CheckPassSegments("UploadPassSegments", segments, rows, slots));
  return DevicePassSegments::HostOnly(segments, rows);
}

namespace {

// INVALID_ARGUMENT unless `view` holds `rows` rows of `cols` at `stride`
// and `pool` a state of `per_slot` floats for every segment's slot.
absl::Status CheckSegmentViews(const char* op, const char* what,
                               DeviceFloats view, int64_t rows, int64_t cols,
                               int64_t stride) {
  if (stride < cols || view.size < kernels::StridedExtent(rows, cols, stride)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", what, " holds ", view.size, " floats, not ",
                     rows, " rows of ", cols, " at stride ", stride));
  }
  return absl::OkStatus();
}

absl::Status CheckSegmentPool(const char* op, DeviceFloats pool,
                              int64_t per_slot,
                              const DevicePassSegments& segments) {
  for (const kernels::PassSegment& s : segments.segments()) {
    if ((s.slot + 1) * per_slot > pool.size) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": slot ", s.slot, " is outside the pool of ",
                       pool.size / std::max<int64_t>(per_slot, 1), " slots"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ExecutorDevice::CausalConv1dSegments(
    DeviceFloats x, int64_t channels, int64_t x_stride, DeviceFloats weight,
    int64_t kernel_size, DeviceFloats tails, const DevicePassSegments& segments,
    DeviceFloats out) {
  constexpr char kOp[] = "CausalConv1dSegments";
  if (kernel_size < 1 || channels < 1) {
    return absl::InvalidArgumentError(
        "CausalConv1dSegments: kernel size and channels must be >= 1");
  }
  const int64_t rows = segments.rows();
  TWICE_RETURN_IF_ERROR(
      CheckSegmentViews(kOp, "x", x, rows, channels, x_stride));
  TWICE_RETURN_IF_ERROR(
      CheckSegmentViews(kOp, "out", out, rows, channels, channels));
  const int64_t tail_floats = (kernel_size - 1) * channels;
  TWICE_RETURN_IF_ERROR(CheckSegmentPool(kOp, tails, tail_floats, segments));
  for (const kernels::PassSegment& s : segments.segments()) {
    TWICE_RETURN_IF_ERROR(
        CausalConv1d(x.sub(s.first_row * x_stride,
                           kernels::StridedExtent(s.rows, channels, x_stride)),
                     s.rows, channels, x_stride, weight, kernel_size,
                     tails.sub(s.slot * tail_floats, tail_floats),
                     out.sub(s.first_row * channels, s.rows * channels)));
  }
  return absl::OkStatus();
}

absl::Status ExecutorDevice::SsdChunkScanSegments(
    const kernels::SsdShape& shape, int64_t chunk, DeviceFloats x,
    int64_t x_stride, DeviceFloats b, DeviceFloats c, int64_t bc_stride,
    DeviceFloats dt, DeviceFloats a, DeviceFloats d, DeviceFloats states,
    const DevicePassSegments& segments, DeviceFloats y) {
  constexpr char kOp[] = "SsdChunkScanSegments";
  const int64_t rows = segments.rows();
  const int64_t hp = shape.heads * shape.head_dim;
  const int64_t gn = shape.groups * shape.state;
  TWICE_RETURN_IF_ERROR(CheckSegmentViews(kOp, "x", x, rows, hp, x_stride));
  TWICE_RETURN_IF_ERROR(CheckSegmentViews(kOp, "b", b, rows, gn, bc_stride));
  TWICE_RETURN_IF_ERROR(CheckSegmentViews(kOp, "c", c, rows, gn, bc_stride));
  TWICE_RETURN_IF_ERROR(
      CheckSegmentViews(kOp, "dt", dt, rows, shape.heads, shape.heads));
  TWICE_RETURN_IF_ERROR(CheckSegmentViews(kOp, "y", y, rows, hp, hp));
  const int64_t state_floats = hp * shape.state;
  TWICE_RETURN_IF_ERROR(CheckSegmentPool(kOp, states, state_floats, segments));
  for (const kernels::PassSegment& s : segments.segments()) {
    TWICE_RETURN_IF_ERROR(SsdChunkScan(
        shape, s.rows, chunk,
        x.sub(s.first_row * x_stride,
              kernels::StridedExtent(s.rows, hp, x_stride)),
        x_stride,
        b.sub(s.first_row * bc_stride,
              kernels::StridedExtent(s.rows, gn, bc_stride)),
        c.sub(s.first_row * bc_stride,
              kernels::StridedExtent(s.rows, gn, bc_stride)),
        bc_stride, dt.sub(s.first_row * shape.heads, s.rows * shape.heads), a,
        d, states.sub(s.slot * state_floats, state_floats),
        y.sub(s.first_row * hp, s.rows * hp)));
  }
  return absl::OkStatus();
}

absl::Status ExecutorDevice::LinearAttentionSegments(
    DeviceFloats q, DeviceFloats k, DeviceFloats v,
    const kernels::TaylorAttentionDims& dims, float eps, DeviceFloats kv_states,
    DeviceFloats k_states, const DevicePassSegments& segments, DeviceFloats y) {
  constexpr char kOp[] = "LinearAttentionSegments";
  const int64_t rows = segments.rows();
  const int64_t hf = dims.heads * dims.feature_dim;
  const int64_t hv = dims.heads * dims.head_dim;
  const int64_t fs = 1 + dims.feature_dim + dims.feature_dim * dims.feature_dim;
  TWICE_RETURN_IF_ERROR(CheckSegmentViews(kOp, "q", q, rows, hf, hf));
  TWICE_RETURN_IF_ERROR(CheckSegmentViews(kOp, "k", k, rows, hf, hf));
  TWICE_RETURN_IF_ERROR(CheckSegmentViews(kOp, "v", v, rows, hv, hv));
  TWICE_RETURN_IF_ERROR(CheckSegmentViews(kOp, "y", y, rows, hv, hv));
  TWICE_RETURN_IF_ERROR(CheckSegmentPool(kOp, kv_states, hv * fs, segments));
  TWICE_RETURN_IF_ERROR(
      CheckSegmentPool(kOp, k_states, dims.heads * fs, segments));
  for (const kernels::PassSegment& s : segments.segments()) {
    TWICE_RETURN_IF_ERROR(LinearAttention(
        q.sub(s.first_row * hf, s.rows * hf),
        k.sub(s.first_row * hf, s.rows * hf),
        v.sub(s.first_row * hv, s.rows * hv), s.rows, q.sub(0, 0), v.sub(0, 0),
        0, dims, eps, kv_states.sub(s.slot * hv * fs, hv * fs),
        k_states.sub(s.slot * dims.heads * fs, dims.heads * fs),
        y.sub(s.first_row * hv, s.rows * hv)));
  }
  return absl::OkStatus();
}

namespace {

// Ring rows [first, first + count) (mod L) of one slot's ring <-> `count`
// consecutive rows of `other` (row stride `stride`), `width` floats each:
// at most two runs.
absl::Status CopyRing(ExecutorDevice& dev, DeviceFloats ring, int64_t window,
                      int64_t width, int64_t first, int64_t count,
                      DeviceFloats other, int64_t stride, bool to_ring) {
  int64_t done = 0;
  while (done < count) {
    const int64_t row = (first + done) % window;
    const int64_t run = std::min(count - done, window - row);
    const DeviceFloats ring_rows = ring.sub(row * width, run * width);
    const DeviceFloats other_rows =
        other.sub(done * stride, (run - 1) * stride + width);
    TWICE_RETURN_IF_ERROR(
        to_ring
            ? dev.CopyRows(other_rows, stride, ring_rows, width, run, width)
            : dev.CopyRows(ring_rows, width, other_rows, stride, run, width));
    done += run;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ExecutorDevice::WindowAttentionSegments(
    DeviceFloats qkv, int64_t qkv_stride, const kernels::WindowStepDims& dims,
    float rope_base, float scale, DeviceFloats ring_k, DeviceFloats ring_v,
    const DevicePassSegments& segments, DeviceFloats context, DeviceFloats y) {
  constexpr char kOp[] = "WindowAttentionSegments";
  const int64_t heads = dims.heads, hd = dims.head_dim, window = dims.window;
  const int64_t d = heads * hd;
  if (heads < 1 || hd < 2 || hd % 2 != 0 || window < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": need heads >= 1, an even head_dim and a window >= 1"));
  }
  const int64_t rows = segments.rows();
  TWICE_RETURN_IF_ERROR(
      CheckSegmentViews(kOp, "qkv", qkv, rows, 3 * d, qkv_stride));
  TWICE_RETURN_IF_ERROR(CheckSegmentViews(kOp, "y", y, rows, d, d));
  TWICE_RETURN_IF_ERROR(CheckSegmentPool(kOp, ring_k, window * d, segments));
  TWICE_RETURN_IF_ERROR(CheckSegmentPool(kOp, ring_v, window * d, segments));
  for (const kernels::PassSegment& s : segments.segments()) {
    const int64_t n = s.rows, start = s.start;
    // Context: the ring's live rows, oldest first, then the new keys.
    const int64_t past = std::min(start, window);
    if (context.size < 2 * (past + n) * d) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOp, ": the context workspace holds ", context.size,
                       " floats, not ", 2 * (past + n) * d));
    }
    const DeviceFloats seg_qkv = qkv.sub(
        s.first_row * qkv_stride, kernels::StridedExtent(n, 3 * d, qkv_stride));
    TWICE_RETURN_IF_ERROR(
        RopeRotateHalf(seg_qkv, n, qkv_stride, heads, hd, start, rope_base));
    TWICE_RETURN_IF_ERROR(RopeRotateHalf(seg_qkv.sub(d, seg_qkv.size - d), n,
                                         qkv_stride, heads, hd, start,
                                         rope_base));
    const DeviceFloats rk = ring_k.sub(s.slot * window * d, window * d);
    const DeviceFloats rv = ring_v.sub(s.slot * window * d, window * d);
    const DeviceFloats ctx_k = context.sub(0, (past + n) * d);
    const DeviceFloats ctx_v = context.sub(ctx_k.size, (past + n) * d);
    const DeviceFloats new_k = seg_qkv.sub(d, (n - 1) * qkv_stride + d);
    const DeviceFloats new_v = seg_qkv.sub(2 * d, (n - 1) * qkv_stride + d);
    TWICE_RETURN_IF_ERROR(
        CopyRing(*this, rk, window, d, start - past, past, ctx_k, d, false));
    TWICE_RETURN_IF_ERROR(
        CopyRing(*this, rv, window, d, start - past, past, ctx_v, d, false));
    TWICE_RETURN_IF_ERROR(
        CopyRows(new_k, qkv_stride, ctx_k.sub(past * d, n * d), d, n, d));
    TWICE_RETURN_IF_ERROR(
        CopyRows(new_v, qkv_stride, ctx_v.sub(past * d, n * d), d, n, d));
    const kernels::WindowAttentionDims wd{n, past, heads, hd, window};
    TWICE_RETURN_IF_ERROR(WindowAttention(seg_qkv, qkv_stride, ctx_k, ctx_v, wd,
                                          scale,
                                          y.sub(s.first_row * d, n * d)));
    // Only the last L new tokens stay visible to later queries.
    const int64_t keep = std::min(n, window);
    const int64_t first = n - keep;
    TWICE_RETURN_IF_ERROR(
        CopyRing(*this, rk, window, d, start + first, keep,
                 new_k.sub(first * qkv_stride, (keep - 1) * qkv_stride + d),
                 qkv_stride, true));
    TWICE_RETURN_IF_ERROR(
        CopyRing(*this, rv, window, d, start + first, keep,
                 new_v.sub(first * qkv_stride, (keep - 1) * qkv_stride + d),
                 qkv_stride, true));
  }
  return absl::OkStatus();
}

}  // namespace twice::engine
