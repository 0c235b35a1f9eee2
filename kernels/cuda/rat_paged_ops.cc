// Validating wrappers of the RAT kernels over paged closed chunks
// (cuda_ops.h), with the checks of their CPU twins (kernels/rat_paged.h)
// run on the host copies of the positions, slots and block tables; the
// device copies must match them in size.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pass_table_args.h"
#include "kernels/pass_segments.h"
#include "kernels/rat_paged.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {
namespace {

// CheckRatPagedRows on the host copies, the device copies' sizes and the
// int ranges of the launch arguments.
absl::Status CheckRatCall(const char* op, const DevicePagedRows& rows,
                          const RatPagedDims& dims,
                          const DeviceBlockTableView& table,
                          int64_t closed_size) {
  TWICE_RETURN_IF_ERROR(
      CheckRatPagedRows(PagedRows{rows.rows, rows.start, rows.positions_host},
                        dims, table.host, closed_size));
  TWICE_RETURN_IF_ERROR(CheckPassDeviceCopies(op, rows, table));
  return CheckArg(dims.heads <= kMaxPagedDim && dims.head_dim() <= kMaxPagedDim,
                  op, "need heads and head_dim <= 65535");
}

launch::RatPagedArgs MakeRatArgs(const DevicePagedRows& rows,
                                 const RatPagedDims& dims,
                                 const DeviceBlockTableView& table) {
  launch::RatPagedArgs args;
  SetPassTableArgs(rows, table, dims.table_width, dims.block_size, args);
  args.chunk_size = dims.chunk_size;
  args.dim = dims.dim;
  args.heads = static_cast<int>(dims.heads);
  args.groups = static_cast<int>(dims.groups);
  args.rope_base = dims.rope_base;
  return args;
}

}  // namespace

absl::Status RatChunkScan(const Stream& stream, DeviceSpan<const float> proj,
                          int64_t proj_stride,
                          DeviceSpan<const float> gate_bias,
                          const DevicePagedRows& rows,
                          const DeviceSlotRows& slots, const RatPagedDims& dims,
                          const DeviceBlockTableView& table,
                          DeviceSpan<float> open, DeviceSpan<float> closed,
                          DeviceSpan<float> q_out, DeviceSpan<float> k_out,
                          DeviceSpan<float> v_out, DeviceSpan<float> z_out) {
  constexpr char kOp[] = "RatChunkScan";
  TWICE_RETURN_IF_ERROR(CheckRatCall(kOp, rows, dims, table, closed.size));
  const int64_t d = dims.dim, n = rows.rows;
  const int64_t w = dims.proj_width();
  TWICE_RETURN_IF_ERROR(
      CheckArg(proj_stride >= w, kOp, "proj_stride < 3D + 2 G hd"));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "proj", proj.size, StridedExtent(n, w, proj_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "gate_bias", gate_bias.size, d));
  for (const DeviceSpan<float>& out : {q_out, k_out, v_out, z_out}) {
    TWICE_RETURN_IF_ERROR(CheckSize(kOp, "an output", out.size, n * d));
  }
  TWICE_RETURN_IF_ERROR(
      CheckArg(open.size % (2 * d) == 0, kOp, "open is not [slots, 2, D]"));
  const int64_t capacity = open.size / (2 * d);
  const int64_t slot_rows = rows.positions_host.empty() ? (n > 0 ? 1 : 0) : n;
  TWICE_RETURN_IF_ERROR(
      CheckArg(static_cast<int64_t>(slots.host.size()) == slot_rows, kOp,
               "need one slot per row (one for a prefill pass)"));
  TWICE_RETURN_IF_ERROR(CheckDeviceCopy(kOp, "slot map",
                                        static_cast<int64_t>(slots.host.size()),
                                        slots.device.size));
  std::vector<bool> seen(static_cast<size_t>(capacity), false);
  for (const int32_t s : slots.host) {
    TWICE_RETURN_IF_ERROR(CheckArg(s >= 0 && s < capacity && !seen[s], kOp,
                                   "slots must be distinct and in range"));
    seen[s] = true;
  }
  if (n == 0) return absl::OkStatus();
  return CudaStatus(
      launch::RatChunkScan(MakeRatArgs(rows, dims, table), proj.data,
                           proj_stride, gate_bias.data, slots.device.data,
                           open.data, closed.data, q_out.data, k_out.data,
                           v_out.data, z_out.data, stream.get()),
      kOp);
}

absl::Status RatChunkScanSegments(
    const Stream& stream, DeviceSpan<const float> proj, int64_t proj_stride,
    DeviceSpan<const float> gate_bias, int64_t rows,
    const DevicePassSegments& segments, const RatPagedDims& dims,
    const DeviceBlockTableView& row_table, DeviceSpan<float> open,
    DeviceSpan<float> closed, DeviceSpan<float> q_out, DeviceSpan<float> k_out,
    DeviceSpan<float> v_out, DeviceSpan<float> z_out) {
  constexpr char kOp[] = "RatChunkScanSegments";
  const int64_t d = dims.dim, w = dims.proj_width();
  TWICE_RETURN_IF_ERROR(CheckArg(
      rows >= 0 && d >= 1 && dims.chunk_size >= 1 && dims.table_width >= 1, kOp,
      "bad dimensions"));
  TWICE_RETURN_IF_ERROR(
      CheckArg(proj_stride >= w, kOp, "proj_stride < 3D + 2 G hd"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(kOp, "proj", proj.size,
                                     StridedExtent(rows, w, proj_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "gate_bias", gate_bias.size, d));
  for (const DeviceSpan<float>& out : {q_out, k_out, v_out, z_out}) {
    TWICE_RETURN_IF_ERROR(CheckSize(kOp, "an output", out.size, rows * d));
  }
  TWICE_RETURN_IF_ERROR(
      CheckArg(open.size % (2 * d) == 0, kOp, "open is not [slots, 2, D]"));
  const int64_t count = static_cast<int64_t>(segments.host.size());
  TWICE_RETURN_IF_ERROR(
      CheckArg(count <= 65535, kOp, "more than 65535 segments"));
  TWICE_RETURN_IF_ERROR(
      CheckDeviceCopy(kOp, "segments", 4 * count, segments.device.size));
  TWICE_RETURN_IF_ERROR(
      CheckPassSegments(kOp, segments.host, rows, open.size / (2 * d)));
  const int64_t width = dims.table_width;
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "the row table",
                                  static_cast<int64_t>(row_table.host.size()),
                                  rows * width));
  TWICE_RETURN_IF_ERROR(CheckDeviceCopy(
      kOp, "row table", static_cast<int64_t>(row_table.host.size()),
      row_table.device.size));
  int64_t most = 1;  // thread groups of the longest segment
  for (const PassSegment& seg : segments.host) {
    const DeviceBlockTableView own{
        row_table.host.subspan(static_cast<size_t>(seg.first_row * width),
                               static_cast<size_t>(width)),
        row_table.device.subspan(seg.first_row * width, width)};
    TWICE_RETURN_IF_ERROR(
        CheckRatCall(kOp, DevicePagedRows{seg.rows, seg.start, {}, {}}, dims,
                     own, closed.size));
    if (seg.rows == 0) continue;
    const int64_t groups = (seg.start + seg.rows - 1) / dims.chunk_size -
                           seg.start / dims.chunk_size + 1;
    most = std::max(most, groups > 1 ? groups - 1 : 1);
  }
  if (count == 0 || rows == 0) return absl::OkStatus();
  return CudaStatus(
      launch::RatChunkScanSegments(
          MakeRatArgs(DevicePagedRows{rows, 0, {}, {}}, dims, row_table),
          reinterpret_cast<const launch::PassSegment*>(segments.device.data),
          static_cast<int>(count), most, proj.data, proj_stride, gate_bias.data,
          open.data, closed.data, q_out.data, k_out.data, v_out.data,
          z_out.data, stream.get()),
      kOp);
}

absl::Status RatPagedAttention(
    const Stream& stream, DeviceSpan<const float> q,
    DeviceSpan<const float> own_k, DeviceSpan<const float> own_v,
    DeviceSpan<const float> z, const DevicePagedRows& rows,
    const RatPagedDims& dims, const DeviceBlockTableView& table,
    DeviceSpan<const float> closed, float scale, DeviceSpan<float> out) {
  constexpr char kOp[] = "RatPagedAttention";
  TWICE_RETURN_IF_ERROR(CheckRatCall(kOp, rows, dims, table, closed.size));
  TWICE_RETURN_IF_ERROR(CheckArg(AttentionHeadDimSupported(dims.head_dim()),
                                 kOp, "head_dim must be in [1, 128]"));
  const int64_t n = rows.rows * dims.dim;
  for (const DeviceSpan<const float>& in : {q, own_k, own_v, z}) {
    TWICE_RETURN_IF_ERROR(CheckSize(kOp, "an input", in.size, n));
  }
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size, n));
  if (rows.rows == 0) return absl::OkStatus();
  return CudaStatus(
      launch::RatPagedAttention(MakeRatArgs(rows, dims, table), q.data,
                                own_k.data, own_v.data, z.data, closed.data,
                                scale, out.data, stream.get()),
      kOp);
}

}  // namespace twice::kernels::cuda
