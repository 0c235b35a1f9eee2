// The CUDA executor device's operations on rows addressed by tables
// (cuda_executor_device.h): the paged KV cache, RAT's paged chunks and the
// mixture-of-experts routes.
#if TWICE_HAVE_CUDA
#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "engine/executor/cuda_executor_device.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/paged_splits.h"
#include "kernels/status_macros.h"

namespace twice::engine::cuda_executor {

absl::Status CudaExecutorDevice::RatChunkScan(
    DeviceFloats proj, int64_t proj_stride, DeviceFloats gate_bias,
    const DevicePassRows& rows, int32_t prefill_slot,
    const kernels::RatPagedDims& dims, const DeviceBlockTable& table,
    DeviceFloats open, DeviceFloats closed, DeviceFloats q_out,
    DeviceFloats k_out, DeviceFloats v_out, DeviceFloats z_out) {
  cuda::DeviceSlotRows slots;
  DeviceFloats states = open;
  static constexpr int32_t kSlotZero[] = {0};
  if (rows.step != nullptr) {
    slots = SlotRowsOf(*rows.step);
  } else {
    // The pass's one sequence: its slot's [2, D] as a one-slot array.
    const int64_t per_slot = 2 * dims.dim;
    if (prefill_slot < 0 || (prefill_slot + 1) * per_slot > open.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("RatChunkScan: slot ", prefill_slot,
                       " is outside the open-state array"));
    }
    states = open.sub(prefill_slot * per_slot, per_slot);
    slots = {kSlotZero, {static_cast<const int32_t*>(slot_zero_.data()), 1}};
  }
  return cuda::RatChunkScan(
      *stream_, ConstSpan(proj), proj_stride, ConstSpan(gate_bias),
      CudaPagedRowsOf(rows), slots, WithTableWidth(dims, table),
      static_cast<const CudaBlockTable&>(table).view(), Span(states),
      Span(closed), Span(q_out), Span(k_out), Span(v_out), Span(z_out));
}

absl::Status CudaExecutorDevice::GatherRows(DeviceFloats src, int64_t cols,
                                            const DeviceRoutes& routes,
                                            DeviceFloats dst) {
  return cuda::GatherRows(*stream_, ConstSpan(src), cols,
                          static_cast<const CudaRoutes&>(routes).view(),
                          Span(dst));
}

absl::Status CudaExecutorDevice::CombineRoutedRows(
    DeviceFloats base, DeviceFloats routed, int64_t cols,
    const DeviceRoutes& routes, float scale, DeviceFloats x) {
  return cuda::CombineRoutedRows(
      *stream_, ConstSpan(base), ConstSpan(routed), cols,
      static_cast<const CudaRoutes&>(routes).view(), scale, Span(x));
}

absl::Status CudaExecutorDevice::RouteTopKPairs(DeviceFloats logits,
                                                int64_t rows, int64_t experts,
                                                int64_t top_k,
                                                const StepPadRows& padding,
                                                DeviceFloats pair_experts,
                                                DeviceFloats pair_gates) {
  cuda::DevicePaddingRows pad_rows{{}, padding.first_slot};
  if (padding.step != nullptr) {
    pad_rows.row_slots =
        static_cast<const CudaSlotMap&>(*padding.step).rows().device;
  }
  return cuda::RouteTopKPairs(*stream_, ConstSpan(logits), rows, experts, top_k,
                              pad_rows, Span(pair_experts), Span(pair_gates));
}

absl::Status CudaExecutorDevice::RoutedLinear(DeviceFloats x, int64_t x_group,
                                              const DeviceMatrixTable& weights,
                                              DeviceFloats pair_experts,
                                              int64_t pairs, DeviceFloats y) {
  TWICE_ASSIGN_OR_RETURN(
      cuda::DeviceSpan<int32_t> workspace,
      Kept<int32_t>(route_workspace_,
                    cuda::RoutedLinearWorkspace(weights.experts(),
                                                std::max<int64_t>(pairs, 0))));
  return cuda::RoutedLinear(
      *stream_, ConstSpan(x), x_group,
      static_cast<const CudaMatrixTable&>(weights).weights(),
      ConstSpan(pair_experts), pairs, workspace, Span(y));
}

absl::Status CudaExecutorDevice::CombineRoutedPairs(
    DeviceFloats base, DeviceFloats routed, int64_t cols, int64_t rows,
    int64_t top_k, DeviceFloats pair_gates, float scale, DeviceFloats x) {
  return cuda::CombineRoutedPairs(*stream_, ConstSpan(base), ConstSpan(routed),
                                  cols, rows, top_k, ConstSpan(pair_gates),
                                  scale, Span(x));
}

absl::Status CudaExecutorDevice::RatPagedAttention(
    DeviceFloats q, DeviceFloats own_k, DeviceFloats own_v, DeviceFloats z,
    const DevicePassRows& rows, const kernels::RatPagedDims& dims,
    const DeviceBlockTable& table, DeviceFloats closed, float scale,
    DeviceFloats out) {
  return cuda::RatPagedAttention(
      *stream_, ConstSpan(q), ConstSpan(own_k), ConstSpan(own_v), ConstSpan(z),
      CudaPagedRowsOf(rows), WithTableWidth(dims, table),
      static_cast<const CudaBlockTable&>(table).view(), ConstSpan(closed),
      scale, Span(out));
}

absl::Status CudaExecutorDevice::RopeRotateHalfAt(
    DeviceFloats x, int64_t row_stride, int64_t heads, int64_t head_dim,
    const DeviceSlotMap& step, float base) {
  const auto& map = static_cast<const CudaSlotMap&>(step);
  return cuda::RopeRotateHalfAt(*stream_, Span(x),
                                static_cast<int64_t>(map.positions().size()),
                                row_stride, heads, head_dim, map.positions(),
                                map.device_positions_span(), base);
}

absl::Status CudaExecutorDevice::PagedKvWrite(
    DeviceFloats k, int64_t k_stride, DeviceFloats v, int64_t v_stride,
    const DevicePassRows& rows, const kernels::PagedKvDims& dims,
    const DeviceBlockTable& table, DeviceFloats k_pool, DeviceFloats v_pool) {
  return cuda::PagedKvWrite(*stream_, ConstSpan(k), k_stride, ConstSpan(v),
                            v_stride, CudaPagedRowsOf(rows),
                            WithTableWidth(dims, table),
                            static_cast<const CudaBlockTable&>(table).view(),
                            Span(k_pool), Span(v_pool));
}

absl::Status CudaExecutorDevice::PagedAttention(
    DeviceFloats q, int64_t q_stride, const DevicePassRows& rows,
    const kernels::PagedKvDims& dims, const DeviceBlockTable& table,
    DeviceFloats k_pool, DeviceFloats v_pool, float scale, DeviceFloats y) {
  const kernels::PagedKvDims d = WithTableWidth(dims, table);
  // Splits by the longest position the table can address, partial sums
  // in a block sized for any pass and made at the first (a prefill's, not
  // a recording's): a recorded step keeps both, and no batch size or
  // length moves the block.
  cuda::PagedSplit split;
  split.splits = cuda::PagedAttentionSplits(
      rows.rows * d.heads, d.table_width * d.block_size, split_warps_);
  if (split_warps_ > 0) {
    TWICE_ASSIGN_OR_RETURN(
        split.partials,
        Kept<float>(split_partials_,
                    cuda::MaxPagedSplitFloats(d.head_dim, split_warps_)));
  }
  return cuda::PagedCausalAttention(
      *stream_, ConstSpan(q), q_stride, CudaPagedRowsOf(rows), d,
      static_cast<const CudaBlockTable&>(table).view(), ConstSpan(k_pool),
      ConstSpan(v_pool), scale, Span(y), split);
}

}  // namespace twice::engine::cuda_executor
#endif  // TWICE_HAVE_CUDA
