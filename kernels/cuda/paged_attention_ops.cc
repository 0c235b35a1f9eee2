// Validating wrappers of the paged KV cache kernels and of the per-row
// rotary embedding (cuda_ops.h), with the checks of their CPU twins
// (kernels/paged_attention.h, kernels/rope.h) run on the host copies of the
// positions and block tables; the device copies must match them in size.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/paged_splits.h"
#include "kernels/cuda/pass_table_args.h"
#include "kernels/paged_attention.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {
namespace {

// CheckPagedRows on the host copies, the device copies' sizes, the pools'
// sizes and the int ranges of the launch arguments.
absl::Status CheckPagedCall(const char* op, const DevicePagedRows& rows,
                            const PagedKvDims& dims,
                            const DeviceBlockTableView& table,
                            int64_t k_pool_size, int64_t v_pool_size) {
  TWICE_RETURN_IF_ERROR(
      CheckPagedRows(PagedRows{rows.rows, rows.start, rows.positions_host},
                     dims, table.host, k_pool_size));
  TWICE_RETURN_IF_ERROR(CheckArg(k_pool_size == v_pool_size, op,
                                 "the key and value pools differ in size"));
  TWICE_RETURN_IF_ERROR(CheckPassDeviceCopies(op, rows, table));
  return CheckArg(dims.heads <= kMaxPagedDim && dims.head_dim <= kMaxPagedDim,
                  op, "need heads and head_dim <= 65535");
}

launch::PagedRowsArgs MakePagedArgs(const DevicePagedRows& rows,
                                    const PagedKvDims& dims,
                                    const DeviceBlockTableView& table) {
  launch::PagedRowsArgs args;
  SetPassTableArgs(rows, table, dims.table_width, dims.block_size, args);
  args.heads = static_cast<int>(dims.heads);
  args.kv_heads = static_cast<int>(dims.kv_heads);
  args.head_dim = static_cast<int>(dims.head_dim);
  return args;
}

}  // namespace

absl::Status PagedKvWrite(const Stream& stream, DeviceSpan<const float> k,
                          int64_t k_stride, DeviceSpan<const float> v,
                          int64_t v_stride, const DevicePagedRows& rows,
                          const PagedKvDims& dims,
                          const DeviceBlockTableView& table,
                          DeviceSpan<float> k_pool, DeviceSpan<float> v_pool) {
  constexpr char kOp[] = "PagedKvWrite";
  TWICE_RETURN_IF_ERROR(
      CheckPagedCall(kOp, rows, dims, table, k_pool.size, v_pool.size));
  const int64_t kv_row = dims.kv_heads * dims.head_dim;
  TWICE_RETURN_IF_ERROR(CheckArg(k_stride >= kv_row && v_stride >= kv_row, kOp,
                                 "a row stride is below H_kv * head_dim"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "k", k.size, StridedExtent(rows.rows, kv_row, k_stride)));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "v", v.size, StridedExtent(rows.rows, kv_row, v_stride)));
  if (rows.rows == 0) return absl::OkStatus();
  return CudaStatus(
      launch::PagedKvWrite(MakePagedArgs(rows, dims, table), k.data, k_stride,
                           v.data, v_stride, k_pool.data, v_pool.data,
                           stream.get()),
      kOp);
}

absl::Status PagedCausalAttention(
    const Stream& stream, DeviceSpan<const float> q, int64_t q_stride,
    const DevicePagedRows& rows, const PagedKvDims& dims,
    const DeviceBlockTableView& table, DeviceSpan<const float> k_pool,
    DeviceSpan<const float> v_pool, float scale, DeviceSpan<float> out,
    const PagedSplit& split) {
  constexpr char kOp[] = "PagedCausalAttention";
  TWICE_RETURN_IF_ERROR(
      CheckPagedCall(kOp, rows, dims, table, k_pool.size, v_pool.size));
  TWICE_RETURN_IF_ERROR(CheckArg(AttentionHeadDimSupported(dims.head_dim), kOp,
                                 "head_dim must be in [1, 128]"));
  const int64_t row = dims.heads * dims.head_dim;
  TWICE_RETURN_IF_ERROR(
      CheckArg(q_stride >= row, kOp, "q_stride < heads * head_dim"));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "q", q.size, StridedExtent(rows.rows, row, q_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size, rows.rows * row));
  TWICE_RETURN_IF_ERROR(
      CheckArg(split.splits >= 1 && split.splits <= kMaxPagedSplits, kOp,
               absl::StrCat("splits must be in [1, ", kMaxPagedSplits, "]")));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "partials", split.partials.size,
      PagedSplitFloats(rows.rows, dims.heads, dims.head_dim, split.splits)));
  if (rows.rows == 0) return absl::OkStatus();
  return CudaStatus(
      launch::PagedCausalAttention(MakePagedArgs(rows, dims, table), q.data,
                                   q_stride, k_pool.data, v_pool.data, scale,
                                   out.data, static_cast<int>(split.splits),
                                   split.partials.data, stream.get()),
      kOp);
}

absl::Status RopeRotateHalfAt(const Stream& stream, DeviceSpan<float> x,
                              int64_t rows, int64_t row_stride, int64_t heads,
                              int64_t head_dim,
                              absl::Span<const int64_t> positions_host,
                              DeviceSpan<const int64_t> positions_device,
                              float base) {
  constexpr char kOp[] = "RopeRotateHalfAt";
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows >= 0 && static_cast<int64_t>(positions_host.size()) == rows,
               kOp, "need one position per row"));
  TWICE_RETURN_IF_ERROR(CheckDeviceCopy(
      kOp, "positions", static_cast<int64_t>(positions_host.size()),
      positions_device.size));
  TWICE_RETURN_IF_ERROR(
      CheckArg(heads >= 1 && heads <= kMaxPagedDim && head_dim >= 2 &&
                   head_dim <= kMaxPagedDim && head_dim % 2 == 0 &&
                   row_stride >= heads * head_dim && base > 0.0f,
               kOp, "bad dimensions"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "x", x.size, StridedExtent(rows, heads * head_dim, row_stride)));
  for (const int64_t p : positions_host) {
    TWICE_RETURN_IF_ERROR(CheckArg(p >= 0, kOp, "a position is negative"));
  }
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(launch::RopeRotateHalfAt(
                        x.data, rows, row_stride, static_cast<int>(heads),
                        static_cast<int>(head_dim), positions_device.data, base,
                        stream.get()),
                    kOp);
}

}  // namespace twice::kernels::cuda
