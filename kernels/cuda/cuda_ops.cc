// Validating wrappers of the attention and sequence kernels (Based / JRT,
// convolutions, window, GQA and RAT attention, the SSD scan, flash
// attention): check every size against the dimensions (the CPU entry
// points' rules, kernels/check.h), then call the raw launchers of launch.h
// and convert their errors. Row-wise ones: elementwise_ops.cc.
#include "kernels/cuda/cuda_ops.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/featurized_args.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/span_bits.h"
#include "kernels/cuda/ssd_args.h"
#include "kernels/dtype.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {
namespace {

absl::Status Launched(cudaError_t error, const char* op) {
  return CudaStatus(error, op);
}

int64_t FeatureWidth(int64_t f) { return 1 + f + f * f; }

absl::Status CheckFused(const char* op, const FusedLinearAttentionDims& d,
                        int64_t tokens, DeviceSpan<const Bf16> q,
                        DeviceSpan<const Bf16> k, DeviceSpan<const Bf16> v,
                        DeviceSpan<float> kv_state, DeviceSpan<float> k_state,
                        DeviceSpan<Bf16> y) {
  TWICE_RETURN_IF_ERROR(CheckArg(d.batch >= 1 && d.heads >= 1 && tokens >= 0,
                                 op, "need batch, heads >= 1, tokens >= 0"));
  TWICE_RETURN_IF_ERROR(
      CheckArg(d.feature_dim == launch::kTaylorF && d.head_dim == 64, op,
               "the fused kernel needs feature_dim 16 and head_dim 64"));
  TWICE_RETURN_IF_ERROR(CheckArg(d.batch <= 65535, op, "batch > 65535"));
  const int64_t bth = d.batch * tokens * d.heads;
  const int64_t dd = FeatureWidth(d.feature_dim);
  TWICE_RETURN_IF_ERROR(CheckSize(op, "q", q.size, bth * d.feature_dim));
  TWICE_RETURN_IF_ERROR(CheckSize(op, "k", k.size, bth * d.feature_dim));
  TWICE_RETURN_IF_ERROR(CheckSize(op, "v", v.size, bth * d.head_dim));
  TWICE_RETURN_IF_ERROR(CheckSize(op, "kv_state", kv_state.size,
                                  d.batch * d.heads * d.head_dim * dd));
  TWICE_RETURN_IF_ERROR(
      CheckSize(op, "k_state", k_state.size, d.batch * d.heads * dd));
  return CheckSize(op, "y", y.size, bth * d.head_dim);
}

}  // namespace

bool AttentionHeadDimSupported(int64_t head_dim) {
  return head_dim >= 1 && head_dim <= 128;
}

bool FusedLinearAttentionFits(int ordinal) {
  int limit = 0;
  return cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                ordinal) == cudaSuccess &&
         limit >= launch::LinearAttentionPrefillSharedBytes();
}

absl::Status LinearAttentionPrefillBf16(
    const Stream& stream, DeviceSpan<const Bf16> q, DeviceSpan<const Bf16> k,
    DeviceSpan<const Bf16> v, int64_t tokens,
    const FusedLinearAttentionDims& dims, float eps, DeviceSpan<float> kv_state,
    DeviceSpan<float> k_state, DeviceSpan<Bf16> y) {
  return PrefixLinearAttentionPrefillBf16(stream, q, k, v, tokens, {}, {}, 0,
                                          dims, eps, kv_state, k_state, y);
}

absl::Status PrefixLinearAttentionPrefillBf16(
    const Stream& stream, DeviceSpan<const Bf16> q, DeviceSpan<const Bf16> k,
    DeviceSpan<const Bf16> v, int64_t tokens, DeviceSpan<const Bf16> k_enc,
    DeviceSpan<const Bf16> v_enc, int64_t encoder_tokens,
    const FusedLinearAttentionDims& dims, float eps, DeviceSpan<float> kv_state,
    DeviceSpan<float> k_state, DeviceSpan<Bf16> y) {
  constexpr char kOp[] = "PrefixLinearAttentionPrefillBf16";
  TWICE_RETURN_IF_ERROR(
      CheckFused(kOp, dims, tokens, q, k, v, kv_state, k_state, y));
  TWICE_RETURN_IF_ERROR(
      CheckArg(encoder_tokens >= 0, kOp, "encoder_tokens < 0"));
  const int64_t beh = dims.batch * encoder_tokens * dims.heads;
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "k_enc", k_enc.size, beh * dims.feature_dim));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "v_enc", v_enc.size, beh * dims.head_dim));
  if (tokens == 0 && encoder_tokens == 0) return absl::OkStatus();
  if (!FusedLinearAttentionFits(stream.device())) {
    return absl::UnimplementedError(
        absl::StrCat(kOp, ": the fused kernel needs ",
                     launch::LinearAttentionPrefillSharedBytes(),
                     " bytes of shared memory per block, more than device ",
                     stream.device(), " gives"));
  }
  launch::LinearAttentionArgs args;
  args.q = Bits(q);
  args.k = Bits(k);
  args.v = Bits(v);
  args.k_enc = Bits(k_enc);
  args.v_enc = Bits(v_enc);
  args.batch = dims.batch;
  args.tokens = tokens;
  args.encoder_tokens = encoder_tokens;
  args.heads = static_cast<int>(dims.heads);
  args.head_dim = static_cast<int>(dims.head_dim);
  args.eps = eps;
  args.kv_state = kv_state.data;
  args.k_state = k_state.data;
  args.y = Bits(y);
  return Launched(launch::LinearAttentionPrefill(args, stream.get()), kOp);
}

absl::Status LinearAttentionStep(
    const Stream& stream, DeviceSpan<const float> q, DeviceSpan<const float> k,
    DeviceSpan<const float> v, const FusedLinearAttentionDims& d, float eps,
    DeviceSpan<float> kv_state, DeviceSpan<float> k_state,
    DeviceSpan<float> y) {
  constexpr char kOp[] = "LinearAttentionStep";
  TWICE_RETURN_IF_ERROR(
      CheckArg(d.batch >= 1 && d.heads >= 1 && d.head_dim >= 1 &&
                   d.feature_dim >= 1 && d.feature_dim <= 64 &&
                   FeatureWidth(d.feature_dim) <= launch::kMaxFeatureWidth &&
                   d.batch <= 65535,
               kOp,
               "need batch, heads, head_dim >= 1 and "
               "D = 1 + F + F^2 <= 2048"));
  const int64_t bh = d.batch * d.heads;
  const int64_t dd = FeatureWidth(d.feature_dim);
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "q", q.size, bh * d.feature_dim));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "k", k.size, bh * d.feature_dim));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "v", v.size, bh * d.head_dim));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "kv_state", kv_state.size, bh * d.head_dim * dd));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "k_state", k_state.size, bh * dd));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y.size, bh * d.head_dim));
  return Launched(
      launch::LinearAttentionStep(
          q.data, k.data, v.data, d.batch, static_cast<int>(d.heads),
          static_cast<int>(d.head_dim), static_cast<int>(d.feature_dim), eps,
          kv_state.data, k_state.data, y.data, stream.get()),
      kOp);
}

absl::Status TaylorFeatureMap(const Stream& stream, DeviceSpan<const float> x,
                              int64_t rows, int64_t feature_dim,
                              DeviceSpan<float> out) {
  constexpr char kOp[] = "TaylorFeatureMap";
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows >= 0 && feature_dim >= 1 && feature_dim <= 1024, kOp,
               "need rows >= 0, 1 <= feature_dim"));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "x", x.size, rows * feature_dim));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "out", out.size, rows * FeatureWidth(feature_dim)));
  if (rows == 0) return absl::OkStatus();
  return Launched(
      launch::TaylorFeatureMap(x.data, rows, static_cast<int>(feature_dim),
                               out.data, stream.get()),
      kOp);
}

absl::Status CausalConv1d(const Stream& stream, DeviceSpan<const float> x,
                          int64_t tokens, int64_t channels, int64_t x_stride,
                          DeviceSpan<const float> weight, int64_t kernel_size,
                          DeviceSpan<float> tail, DeviceSpan<float> out) {
  constexpr char kOp[] = "CausalConv1d";
  TWICE_RETURN_IF_ERROR(CheckArg(tokens >= 0 && channels >= 1 &&
                                     kernel_size >= 1 && kernel_size <= 64 &&
                                     x_stride >= channels,
                                 kOp, "bad dimensions"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "x", x.size, StridedExtent(tokens, channels, x_stride)));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "weight", weight.size, channels * kernel_size));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "tail", tail.size, (kernel_size - 1) * channels));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size, tokens * channels));
  if (tokens == 0) return absl::OkStatus();
  return Launched(
      launch::CausalConv1d(x.data, tokens, channels, x_stride, weight.data,
                           static_cast<int>(kernel_size), tail.data, out.data,
                           stream.get()),
      kOp);
}

absl::Status FeaturizedLinearAttention(
    const Stream& stream, DeviceSpan<const float> phi_q,
    DeviceSpan<const float> phi_k, DeviceSpan<const float> v, int64_t tokens,
    DeviceSpan<const float> phi_k_enc, DeviceSpan<const float> v_enc,
    int64_t encoder_tokens, const LinearAttentionDims& d, float eps,
    DeviceSpan<float> kv_state, DeviceSpan<float> k_state,
    DeviceSpan<float> y) {
  constexpr char kOp[] = "FeaturizedLinearAttention";
  TWICE_RETURN_IF_ERROR(
      CheckArg(d.heads >= 1 && d.heads <= 65535 && d.head_dim >= 1 &&
                   d.head_dim <= 65535 && d.feature_size >= 1 &&
                   d.feature_size <= launch::kMaxFeatureWidth && tokens >= 0 &&
                   encoder_tokens >= 0,
               kOp, "bad dimensions (feature_size <= 2048)"));
  const int64_t qk_row = d.heads * d.feature_size;
  const int64_t v_row = d.heads * d.head_dim;
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "phi_q", phi_q.size, tokens * qk_row));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "phi_k", phi_k.size, tokens * qk_row));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "v", v.size, tokens * v_row));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "phi_k_enc", phi_k_enc.size, encoder_tokens * qk_row));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "v_enc", v_enc.size, encoder_tokens * v_row));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "kv_state", kv_state.size, v_row * d.feature_size));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "k_state", k_state.size, qk_row));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y.size, tokens * v_row));
  if (tokens == 0 && encoder_tokens == 0) return absl::OkStatus();
  const launch::FeaturizedLinearAttentionArgs args =
      MakeFeaturizedArgs(phi_q, phi_k, v, tokens, phi_k_enc, v_enc,
                         encoder_tokens, d, eps, kv_state, k_state, y);
  return Launched(launch::FeaturizedLinearAttention(args, stream.get()), kOp);
}

absl::Status WindowAttention(const Stream& stream, DeviceSpan<const float> q,
                             int64_t q_stride, DeviceSpan<const float> k,
                             DeviceSpan<const float> v,
                             const WindowAttentionDims& d, float scale,
                             DeviceSpan<float> out) {
  constexpr char kOp[] = "WindowAttention";
  TWICE_RETURN_IF_ERROR(
      CheckArg(d.tokens >= 0 && d.past >= 0 && d.heads >= 1 && d.window >= 0 &&
                   AttentionHeadDimSupported(d.head_dim) &&
                   q_stride >= d.heads * d.head_dim,
               kOp, "bad dimensions (head_dim must be in [1, 128])"));
  const int64_t row = d.heads * d.head_dim;
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "q", q.size, StridedExtent(d.tokens, row, q_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "k", k.size, (d.past + d.tokens) * row));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "v", v.size, (d.past + d.tokens) * row));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size, d.tokens * row));
  if (d.tokens == 0) return absl::OkStatus();
  launch::SoftmaxAttentionArgs args;
  args.q = q.data;
  args.q_stride = q_stride;
  args.k = k.data;
  args.v = v.data;
  args.tokens = d.tokens;
  args.past = d.past;
  args.heads = static_cast<int>(d.heads);
  args.kv_heads = static_cast<int>(d.heads);
  args.head_dim = static_cast<int>(d.head_dim);
  args.window = d.window;
  args.scale = scale;
  args.out = out.data;
  return Launched(launch::SoftmaxAttention(args, stream.get()), kOp);
}

absl::Status CausalGqaAttention(const Stream& stream, DeviceSpan<const float> q,
                                int64_t q_stride, DeviceSpan<const float> k,
                                DeviceSpan<const float> v,
                                const CausalAttentionDims& d, float scale,
                                DeviceSpan<float> out) {
  constexpr char kOp[] = "CausalGqaAttention";
  TWICE_RETURN_IF_ERROR(CheckArg(
      d.tokens >= 0 && d.past >= 0 && d.heads >= 1 && d.kv_heads >= 1 &&
          d.heads % d.kv_heads == 0 && AttentionHeadDimSupported(d.head_dim) &&
          q_stride >= d.heads * d.head_dim,
      kOp, "bad dimensions (head_dim must be in [1, 128])"));
  const int64_t row = d.heads * d.head_dim;
  const int64_t kv_row = d.kv_heads * d.head_dim;
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "q", q.size, StridedExtent(d.tokens, row, q_stride)));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "k", k.size, (d.past + d.tokens) * kv_row));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "v", v.size, (d.past + d.tokens) * kv_row));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size, d.tokens * row));
  if (d.tokens == 0) return absl::OkStatus();
  launch::SoftmaxAttentionArgs args;
  args.q = q.data;
  args.q_stride = q_stride;
  args.k = k.data;
  args.v = v.data;
  args.tokens = d.tokens;
  args.past = d.past;
  args.heads = static_cast<int>(d.heads);
  args.kv_heads = static_cast<int>(d.kv_heads);
  args.head_dim = static_cast<int>(d.head_dim);
  args.window = -1;
  args.scale = scale;
  args.out = out.data;
  return Launched(launch::SoftmaxAttention(args, stream.get()), kOp);
}

absl::Status RatChunkAttention(const Stream& stream, DeviceAllocator& allocator,
                               DeviceRows q, DeviceRows own_k, DeviceRows own_v,
                               DeviceRows chunk_k, DeviceRows chunk_v,
                               absl::Span<const int64_t> visible,
                               const RatAttentionDims& d, float scale,
                               DeviceSpan<float> out) {
  constexpr char kOp[] = "RatChunkAttention";
  const int64_t row = d.heads * d.head_dim;
  TWICE_RETURN_IF_ERROR(CheckArg(d.tokens >= 0 && d.chunks >= 0 &&
                                     d.heads >= 1 &&
                                     AttentionHeadDimSupported(d.head_dim),
                                 kOp, "bad dimensions"));
  for (const DeviceRows* r : {&q, &own_k, &own_v}) {
    TWICE_RETURN_IF_ERROR(CheckArg(r->stride >= row, kOp, "row stride < H·hd"));
    TWICE_RETURN_IF_ERROR(
        CheckAtLeast(kOp, "token rows", r->data.size,
                     StridedExtent(d.tokens, row, r->stride)));
  }
  for (const DeviceRows* r : {&chunk_k, &chunk_v}) {
    TWICE_RETURN_IF_ERROR(CheckArg(r->stride >= row, kOp, "row stride < H·hd"));
    TWICE_RETURN_IF_ERROR(
        CheckAtLeast(kOp, "chunk rows", r->data.size,
                     StridedExtent(d.chunks, row, r->stride)));
  }
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "visible", visible.size(), d.tokens));
  for (const int64_t n : visible) {
    TWICE_RETURN_IF_ERROR(CheckArg(n >= 0 && n <= d.chunks, kOp,
                                   "visible[t] outside [0, chunks]"));
  }
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size, d.tokens * row));
  if (d.tokens == 0) return absl::OkStatus();
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer visible_dev,
                         allocator.AllocateArray<int64_t>(d.tokens));
  TWICE_RETURN_IF_ERROR(stream.Upload(visible.data(), visible_dev.data(),
                                      d.tokens * sizeof(int64_t)));
  launch::RatAttentionArgs args;
  args.q = q.data.data;
  args.q_stride = q.stride;
  args.own_k = own_k.data.data;
  args.own_k_stride = own_k.stride;
  args.own_v = own_v.data.data;
  args.own_v_stride = own_v.stride;
  args.chunk_k = chunk_k.data.data;
  args.chunk_k_stride = chunk_k.stride;
  args.chunk_v = chunk_v.data.data;
  args.chunk_v_stride = chunk_v.stride;
  args.visible = static_cast<const int64_t*>(visible_dev.data());
  args.tokens = d.tokens;
  args.heads = static_cast<int>(d.heads);
  args.head_dim = static_cast<int>(d.head_dim);
  args.scale = scale;
  args.out = out.data;
  // visible_dev returns to the allocator after the launch; reuse is ordered
  // on this stream (device_memory.h).
  return Launched(launch::RatChunkAttention(args, stream.get()), kOp);
}

absl::Status SsdChunkScan(const Stream& stream, DeviceAllocator& allocator,
                          const SsdShape& s, int64_t tokens, int64_t chunk,
                          DeviceSpan<const float> x, int64_t x_stride,
                          DeviceSpan<const float> b, DeviceSpan<const float> c,
                          int64_t bc_stride, DeviceSpan<const float> dt,
                          DeviceSpan<const float> a, DeviceSpan<const float> d,
                          DeviceSpan<float> state, DeviceSpan<float> y,
                          SsdMath math) {
  constexpr char kOp[] = "SsdChunkScan";
  TWICE_RETURN_IF_ERROR(CheckSsdRows(kOp, s, tokens, x.size, x_stride, b.size,
                                     c.size, bc_stride, dt.size, a.size, d.size,
                                     y.size));
  TWICE_RETURN_IF_ERROR(CheckArg(chunk >= 1, kOp, "chunk < 1"));
  const int64_t hp = s.heads * s.head_dim;
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "state", state.size, hp * s.state));
  if (tokens == 0) return absl::OkStatus();
  const launch::SsdArgs args =
      MakeSsdArgs(s, tokens, x, x_stride, b, c, bc_stride, dt, a, d, state, y);
  if (tokens < kSsdChunkedMinTokens ||
      !launch::SsdChunkedSupported(args.head_dim, args.state, chunk)) {
    return Launched(launch::SsdScan(args, stream.get()), kOp);
  }
  const int64_t chunks = (tokens + chunk - 1) / chunk;
  const int64_t chunk_floats = s.heads * s.head_dim * s.state;
  const int64_t per_pass = std::clamp<int64_t>(
      kSsdWorkspaceBytes / (chunk_floats * int64_t{sizeof(float)}), 1, chunks);
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer workspace, allocator.AllocateArray<float>(
                                                     per_pass * chunk_floats));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer decay,
                         allocator.AllocateArray<float>(per_pass * s.heads));
  const bool tensor_cores =
      math == SsdMath::kTensorCores &&
      launch::SsdTensorCoresSupported(args.head_dim, args.state);
  return Launched(
      launch::SsdChunkedScan(args, static_cast<int>(chunk), per_pass,
                             static_cast<float*>(workspace.data()),
                             static_cast<float*>(decay.data()), tensor_cores,
                             stream.get()),
      kOp);
}

absl::Status FlashAttentionBf16(const Stream& stream, DeviceSpan<const Bf16> q,
                                DeviceSpan<const Bf16> k,
                                DeviceSpan<const Bf16> v, int64_t batch,
                                int64_t tokens, int64_t heads, int64_t head_dim,
                                float scale, DeviceSpan<Bf16> out) {
  constexpr char kOp[] = "FlashAttentionBf16";
  TWICE_RETURN_IF_ERROR(CheckArg(batch >= 1 && batch <= 65535 && heads >= 1 &&
                                     heads <= 65535 && tokens >= 0 &&
                                     head_dim == 64,
                                 kOp, "need head_dim 64, batch, heads >= 1"));
  const int64_t n = batch * tokens * heads * head_dim;
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "q", q.size, n));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "k", k.size, n));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "v", v.size, n));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size, n));
  if (tokens == 0) return absl::OkStatus();
  return Launched(launch::FlashAttentionBf16(Bits(q), Bits(k), Bits(v), batch,
                                             tokens, static_cast<int>(heads),
                                             scale, Bits(out), stream.get()),
                  kOp);
}

}  // namespace twice::kernels::cuda
