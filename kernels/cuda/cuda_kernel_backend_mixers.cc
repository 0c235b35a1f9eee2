// CudaKernelBackend's sequence mixers and sampling (cuda_kernel_backend.h):
// each stages its inputs and in-place states on a lane, runs its cuda_ops.h
// kernel and copies the results back. The lanes, the staging helpers, the
// weight cache, Linear and the row-wise ops are in cuda_kernel_backend.cc.
#include <utility>

#include "kernels/check.h"
#include "kernels/cuda/cuda_kernel_backend.h"
#include "kernels/cuda/cuda_kernel_backend_lanes.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.h"
#include "kernels/status_macros.h"
#include "kernels/taylor_feature_map.h"

namespace twice::kernels::cuda {

absl::Status CudaKernelBackend::CausalConv1d(
    absl::Span<const float> x, int64_t tokens, int64_t channels,
    int64_t x_stride, absl::Span<const float> weight, int64_t kernel_size,
    absl::Span<float> tail, absl::Span<float> out) {
  if (kernel_size > 64) return Declined(KernelOp::kCausalConv1d);
  TWICE_ASSIGN_OR_RETURN(LaneLease lease, AcquireLane());
  CallScope scope(lease.lane(), counters_);
  TWICE_ASSIGN_OR_RETURN(
      DeviceSpan<const float> dx,
      Input(scope, x, StridedExtent(tokens, channels, x_stride)));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dw,
                         Input(scope, weight, channels * kernel_size));
  TWICE_ASSIGN_OR_RETURN(
      DeviceSpan<float> dtail,
      Output(scope, tail, static_cast<int64_t>(tail.size()), true));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dout,
                         Output(scope, out, tokens * channels, false));
  TWICE_RETURN_IF_ERROR(
      Ran(KernelOp::kCausalConv1d,
          cuda::CausalConv1d(scope.stream(), dx, tokens, channels, x_stride, dw,
                             kernel_size, dtail, dout)));
  TWICE_RETURN_IF_ERROR(Fetch(scope, dout, out));
  return Fetch(scope, dtail, tail);
}

absl::Status CudaKernelBackend::PrefixLinearAttentionPrefill(
    absl::Span<const float> phi_q, absl::Span<const float> phi_k,
    absl::Span<const float> v, int64_t tokens,
    absl::Span<const float> phi_k_enc, absl::Span<const float> v_enc,
    int64_t encoder_tokens, const LinearAttentionDims& dims, float eps,
    absl::Span<float> kv_state, absl::Span<float> k_state,
    absl::Span<float> y) {
  if (dims.feature_size > 2048 || dims.heads > 65535 || dims.head_dim > 65535) {
    return Declined(KernelOp::kPrefixLinearAttention);
  }
  TWICE_ASSIGN_OR_RETURN(LaneLease lease, AcquireLane());
  CallScope scope(lease.lane(), counters_);
  const int64_t qk = dims.heads * dims.feature_size;
  const int64_t vr = dims.heads * dims.head_dim;
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dq,
                         Input(scope, phi_q, tokens * qk));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dk,
                         Input(scope, phi_k, tokens * qk));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dv,
                         Input(scope, v, tokens * vr));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dke,
                         Input(scope, phi_k_enc, encoder_tokens * qk));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dve,
                         Input(scope, v_enc, encoder_tokens * vr));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dkv,
                         Output(scope, kv_state, vr * dims.feature_size, true));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dz,
                         Output(scope, k_state, qk, true));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dy,
                         Output(scope, y, tokens * vr, false));
  TWICE_RETURN_IF_ERROR(Ran(KernelOp::kPrefixLinearAttention,
                            cuda::FeaturizedLinearAttention(
                                scope.stream(), dq, dk, dv, tokens, dke, dve,
                                encoder_tokens, dims, eps, dkv, dz, dy)));
  TWICE_RETURN_IF_ERROR(Fetch(scope, dy, y));
  TWICE_RETURN_IF_ERROR(Fetch(scope, dkv, kv_state));
  return Fetch(scope, dz, k_state);
}

absl::Status CudaKernelBackend::TaylorLinearAttention(
    absl::Span<const float> q, absl::Span<const float> k,
    absl::Span<const float> v, int64_t tokens, absl::Span<const float> k_enc,
    absl::Span<const float> v_enc, int64_t encoder_tokens,
    const TaylorAttentionDims& dims, float eps, absl::Span<float> kv_state,
    absl::Span<float> k_state, absl::Span<float> y) {
  const FusedLinearAttentionDims fused{1, dims.heads, dims.head_dim,
                                       dims.feature_dim};
  if (fused.feature_dim != launch::kTaylorF || fused.head_dim != 64 ||
      fused.heads > 65535 || !fused_linear_attention_fits_) {
    return Declined(KernelOp::kTaylorLinearAttention);
  }
  TWICE_ASSIGN_OR_RETURN(LaneLease lease, AcquireLane());
  CallScope scope(lease.lane(), counters_);
  const int64_t hf = dims.heads * dims.feature_dim;
  const int64_t hv = dims.heads * dims.head_dim;
  const int64_t width = TaylorFeatureDim(dims.feature_dim);
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const Bf16> dq,
                         InputBf16(scope, q, tokens * hf));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const Bf16> dk,
                         InputBf16(scope, k, tokens * hf));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const Bf16> dv,
                         InputBf16(scope, v, tokens * hv));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const Bf16> dke,
                         InputBf16(scope, k_enc, encoder_tokens * hf));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const Bf16> dve,
                         InputBf16(scope, v_enc, encoder_tokens * hv));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dkv,
                         Output(scope, kv_state, hv * width, true));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dz,
                         Output(scope, k_state, dims.heads * width, true));
  DeviceSpan<Bf16> dy16;
  if (tokens > 0) {
    TWICE_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                           scope.allocator().AllocateArray<Bf16>(tokens * hv));
    dy16 = scope.Keep<Bf16>(std::move(buffer), tokens * hv);
  }
  TWICE_RETURN_IF_ERROR(Ran(KernelOp::kTaylorLinearAttention,
                            cuda::PrefixLinearAttentionPrefillBf16(
                                scope.stream(), dq, dk, dv, tokens, dke, dve,
                                encoder_tokens, fused, eps, dkv, dz, dy16)));
  if (tokens > 0) {
    TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dy,
                           Output(scope, y, tokens * hv, false));
    TWICE_RETURN_IF_ERROR(ConvertToF32(scope.stream(), dy16, dy));
    TWICE_RETURN_IF_ERROR(Fetch(scope, dy, y));
  }
  TWICE_RETURN_IF_ERROR(Fetch(scope, dkv, kv_state));
  return Fetch(scope, dz, k_state);
}

absl::Status CudaKernelBackend::SoftmaxAttention(
    KernelOp op, absl::Span<const float> q, int64_t q_stride,
    absl::Span<const float> k, absl::Span<const float> v, int64_t tokens,
    int64_t past, int64_t q_row, int64_t kv_row, absl::Span<float> out,
    const SoftmaxLaunch& launch) {
  TWICE_ASSIGN_OR_RETURN(LaneLease lease, AcquireLane());
  CallScope scope(lease.lane(), counters_);
  TWICE_ASSIGN_OR_RETURN(
      DeviceSpan<const float> dq,
      Input(scope, q, StridedExtent(tokens, q_row, q_stride)));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dk,
                         Input(scope, k, (past + tokens) * kv_row));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dv,
                         Input(scope, v, (past + tokens) * kv_row));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dout,
                         Output(scope, out, tokens * q_row, false));
  TWICE_RETURN_IF_ERROR(Ran(op, launch(scope, dq, dk, dv, dout)));
  return Fetch(scope, dout, out);
}

absl::Status CudaKernelBackend::WindowAttention(
    absl::Span<const float> q, int64_t q_stride, absl::Span<const float> k,
    absl::Span<const float> v, const WindowAttentionDims& dims, float scale,
    absl::Span<float> out) {
  if (!AttentionHeadDimSupported(dims.head_dim))
    return Declined(KernelOp::kWindowAttention);
  const int64_t row = dims.heads * dims.head_dim;
  return SoftmaxAttention(
      KernelOp::kWindowAttention, q, q_stride, k, v, dims.tokens, dims.past,
      row, row, out,
      [&](CallScope& scope, DeviceSpan<const float> dq,
          DeviceSpan<const float> dk, DeviceSpan<const float> dv,
          DeviceSpan<float> dout) {
        return cuda::WindowAttention(scope.stream(), dq, q_stride, dk, dv, dims,
                                     scale, dout);
      });
}

absl::Status CudaKernelBackend::CausalGqaAttention(
    absl::Span<const float> q, int64_t q_stride, absl::Span<const float> k,
    absl::Span<const float> v, const CausalAttentionDims& dims, float scale,
    absl::Span<float> out) {
  if (!AttentionHeadDimSupported(dims.head_dim))
    return Declined(KernelOp::kCausalGqaAttention);
  return SoftmaxAttention(
      KernelOp::kCausalGqaAttention, q, q_stride, k, v, dims.tokens, dims.past,
      dims.heads * dims.head_dim, dims.kv_heads * dims.head_dim, out,
      [&](CallScope& scope, DeviceSpan<const float> dq,
          DeviceSpan<const float> dk, DeviceSpan<const float> dv,
          DeviceSpan<float> dout) {
        return cuda::CausalGqaAttention(scope.stream(), dq, q_stride, dk, dv,
                                        dims, scale, dout);
      });
}

absl::Status CudaKernelBackend::RatChunkAttention(
    StridedRows q, StridedRows own_k, StridedRows own_v, StridedRows chunk_k,
    StridedRows chunk_v, absl::Span<const int64_t> visible,
    const RatAttentionDims& dims, float scale, absl::Span<float> out) {
  if (!AttentionHeadDimSupported(dims.head_dim))
    return Declined(KernelOp::kRatChunkAttention);
  TWICE_ASSIGN_OR_RETURN(LaneLease lease, AcquireLane());
  CallScope scope(lease.lane(), counters_);
  const int64_t row = dims.heads * dims.head_dim;
  auto rows = [&](StridedRows r, int64_t count) -> absl::StatusOr<DeviceRows> {
    TWICE_ASSIGN_OR_RETURN(
        DeviceSpan<const float> d,
        Input(scope, r.data, StridedExtent(count, row, r.stride)));
    return DeviceRows{d, r.stride};
  };
  TWICE_ASSIGN_OR_RETURN(DeviceRows dq, rows(q, dims.tokens));
  TWICE_ASSIGN_OR_RETURN(DeviceRows dok, rows(own_k, dims.tokens));
  TWICE_ASSIGN_OR_RETURN(DeviceRows dov, rows(own_v, dims.tokens));
  TWICE_ASSIGN_OR_RETURN(DeviceRows dck, rows(chunk_k, dims.chunks));
  TWICE_ASSIGN_OR_RETURN(DeviceRows dcv, rows(chunk_v, dims.chunks));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dout,
                         Output(scope, out, dims.tokens * row, false));
  TWICE_RETURN_IF_ERROR(
      Ran(KernelOp::kRatChunkAttention,
          cuda::RatChunkAttention(scope.stream(), scope.allocator(), dq, dok,
                                  dov, dck, dcv, visible, dims, scale, dout)));
  return Fetch(scope, dout, out);
}

absl::Status CudaKernelBackend::SsdChunkScan(
    const SsdShape& shape, int64_t tokens, int64_t chunk,
    absl::Span<const float> x, int64_t x_stride, absl::Span<const float> b,
    absl::Span<const float> c, int64_t bc_stride, absl::Span<const float> dt,
    absl::Span<const float> a, absl::Span<const float> d,
    absl::Span<float> state, absl::Span<float> y) {
  if (shape.state > 128 || shape.heads > 65535 || shape.head_dim > 1024) {
    return Declined(KernelOp::kSsdChunkScan);
  }
  TWICE_ASSIGN_OR_RETURN(LaneLease lease, AcquireLane());
  CallScope scope(lease.lane(), counters_);
  const int64_t hp = shape.heads * shape.head_dim;
  const int64_t gn = shape.groups * shape.state;
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dx,
                         Input(scope, x, StridedExtent(tokens, hp, x_stride)));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> db,
                         Input(scope, b, StridedExtent(tokens, gn, bc_stride)));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dc,
                         Input(scope, c, StridedExtent(tokens, gn, bc_stride)));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> ddt,
                         Input(scope, dt, tokens * shape.heads));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> da,
                         Input(scope, a, shape.heads));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dd,
                         Input(scope, d, shape.heads));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dstate,
                         Output(scope, state, hp * shape.state, true));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dy,
                         Output(scope, y, tokens * hp, false));
  TWICE_RETURN_IF_ERROR(
      Ran(KernelOp::kSsdChunkScan,
          cuda::SsdChunkScan(scope.stream(), scope.allocator(), shape, tokens,
                             chunk, dx, x_stride, db, dc, bc_stride, ddt, da,
                             dd, dstate, dy)));
  TWICE_RETURN_IF_ERROR(Fetch(scope, dy, y));
  return Fetch(scope, dstate, state);
}

absl::Status CudaKernelBackend::SampleRows(absl::Span<const float> logits,
                                           int64_t rows, int64_t row_stride,
                                           int64_t vocab,
                                           absl::Span<const SamplingRule> rules,
                                           absl::Span<int32_t> out) {
  TWICE_ASSIGN_OR_RETURN(LaneLease lease, AcquireLane());
  CallScope scope(lease.lane(), counters_);
  TWICE_ASSIGN_OR_RETURN(
      DeviceSpan<const float> dl,
      Input(scope, logits, StridedExtent(rows, vocab, row_stride)));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer ids,
                         scope.allocator().AllocateArray<int32_t>(rows));
  DeviceSpan<int32_t> dids = scope.Keep<int32_t>(std::move(ids), rows);
  counters_.CopiedToDevice(rows *
                           static_cast<int64_t>(sizeof(launch::SampleRule)));
  TWICE_RETURN_IF_ERROR(
      Ran(KernelOp::kSampleRows,
          cuda::SampleRows(scope.stream(), scope.allocator(), dl, rows,
                           row_stride, vocab, rules, dids)));
  counters_.CopiedToHost(rows * static_cast<int64_t>(sizeof(int32_t)));
  return CopyToHost(dids.data, out.data(),
                    rows * static_cast<int64_t>(sizeof(int32_t)),
                    scope.raw_stream());
}

}  // namespace twice::kernels::cuda
