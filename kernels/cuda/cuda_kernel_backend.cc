#include "kernels/cuda/cuda_kernel_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_info.h"
#include "kernels/immutable_host_regions.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {

class CudaKernelBackend::CallScope {
 public:
  DeviceSpan<float> Keep(DeviceBuffer buffer, int64_t count) {
    buffers_.push_back(std::move(buffer));
    return {buffers_.back().span<float>().data, count};
  }
  DeviceSpan<Bf16> KeepBf16(DeviceBuffer buffer, int64_t count) {
    buffers_.push_back(std::move(buffer));
    return {buffers_.back().span<Bf16>().data, count};
  }

 private:
  std::vector<DeviceBuffer> buffers_;
};

namespace {

bool AttentionHeadDimOk(int64_t hd) {
  return hd >= 32 && hd <= 128 && hd % 32 == 0;
}

int64_t Bytes(int64_t floats) {
  return floats * static_cast<int64_t>(sizeof(float));
}

}  // namespace

absl::StatusOr<std::shared_ptr<CudaKernelBackend>> CudaKernelBackend::Create(
    int device) {
  if (device < 0 || device >= DeviceCount()) {
    return absl::FailedPreconditionError(
        absl::StrCat("CUDA device ", device, " is not available (",
                     DeviceCount(), " usable device(s) visible)"));
  }
  TWICE_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream,
                         Stream::Create(device));
  std::shared_ptr<CudaKernelBackend> backend(new CudaKernelBackend(
      absl::StrCat("cuda:", device, " (", DeviceName(device), ")"), device,
      std::move(stream)));
  TWICE_ASSIGN_OR_RETURN(
      backend->gemm_,
      GemmRunner::Create(*backend->stream_, backend->allocator_));
  return backend;
}

CudaKernelBackend::CudaKernelBackend(std::string name, int device,
                                     std::unique_ptr<Stream> stream)
    : name_(std::move(name)), allocator_(device), stream_(std::move(stream)) {}

CudaKernelBackend::~CudaKernelBackend() {
  // Device memory goes back before the stream and the allocator go.
  weights_.clear();
  gemm_.reset();
}

KernelBackendStats CudaKernelBackend::stats() const {
  return {device_calls_.load(), cpu_fallbacks_.load()};
}

int64_t CudaKernelBackend::cached_weight_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_weight_bytes_;
}

absl::Status CudaKernelBackend::Declined() {
  cpu_fallbacks_.fetch_add(1, std::memory_order_relaxed);
  return absl::UnimplementedError("shape not covered by the CUDA kernels");
}

absl::Status CudaKernelBackend::Ran(absl::Status status) {
  if (status.ok()) device_calls_.fetch_add(1, std::memory_order_relaxed);
  // An UNIMPLEMENTED from a device op would silently rerun on the CPU: a
  // device op never means "declined", so report it as the internal error
  // it is.
  if (absl::IsUnimplemented(status)) {
    return absl::InternalError(
        absl::StrCat("CUDA backend: ", status.message()));
  }
  return status;
}

void CudaKernelBackend::PruneCache() {
  for (auto it = weights_.begin(); it != weights_.end();) {
    if (ImmutableHostRegionLive(it->second.region_id)) {
      ++it;
    } else {
      cached_weight_bytes_ -= it->second.buffer.bytes();
      it = weights_.erase(it);
    }
  }
}

absl::StatusOr<const CudaKernelBackend::CachedWeight*>
CudaKernelBackend::Cached(absl::Span<const float> host, int64_t count,
                          bool bf16) {
  const std::optional<ImmutableHostRegion> region =
      FindImmutableHostRegion(host.data(), Bytes(count));
  if (!region.has_value()) return nullptr;
  const WeightKey key{host.data(), count, bf16};
  auto it = weights_.find(key);
  if (it != weights_.end() && it->second.region_id == region->id) {
    return &it->second;
  }
  PruneCache();
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer f32, allocator_.Allocate(Bytes(count)));
  TWICE_RETURN_IF_ERROR(
      CopyToDevice(host.data(), f32.data(), Bytes(count), stream_->get()));
  CachedWeight entry;
  entry.region_id = region->id;
  if (bf16) {
    TWICE_ASSIGN_OR_RETURN(entry.buffer, allocator_.AllocateArray<Bf16>(count));
    TWICE_RETURN_IF_ERROR(ConvertToBf16(
        *stream_, DeviceSpan<const float>{f32.span<float>().data, count},
        DeviceSpan<Bf16>{entry.buffer.span<Bf16>().data, count}));
    TWICE_RETURN_IF_ERROR(stream_->Synchronize());
  } else {
    entry.buffer = std::move(f32);
  }
  cached_weight_bytes_ += entry.buffer.bytes();
  auto [slot, inserted] = weights_.insert_or_assign(key, std::move(entry));
  return &slot->second;
}

absl::StatusOr<DeviceSpan<const float>> CudaKernelBackend::Input(
    CallScope& scope, absl::Span<const float> host, int64_t count) {
  if (count == 0) return DeviceSpan<const float>{};
  TWICE_ASSIGN_OR_RETURN(const CachedWeight* cached,
                         Cached(host, count, /*bf16=*/false));
  if (cached != nullptr) {
    return DeviceSpan<const float>{cached->buffer.span<float>().data, count};
  }
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                         allocator_.Allocate(Bytes(count)));
  TWICE_RETURN_IF_ERROR(
      CopyToDevice(host.data(), buffer.data(), Bytes(count), stream_->get()));
  return DeviceSpan<const float>(scope.Keep(std::move(buffer), count));
}

absl::StatusOr<DeviceSpan<const Bf16>> CudaKernelBackend::InputBf16(
    CallScope& scope, absl::Span<const float> host, int64_t count) {
  if (count == 0) return DeviceSpan<const Bf16>{};
  TWICE_ASSIGN_OR_RETURN(const CachedWeight* cached,
                         Cached(host, count, /*bf16=*/true));
  if (cached != nullptr) {
    return DeviceSpan<const Bf16>{cached->buffer.span<Bf16>().data, count};
  }
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> f32,
                         Input(scope, host, count));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                         allocator_.AllocateArray<Bf16>(count));
  DeviceSpan<Bf16> out = scope.KeepBf16(std::move(buffer), count);
  TWICE_RETURN_IF_ERROR(ConvertToBf16(*stream_, f32, out));
  return DeviceSpan<const Bf16>(out);
}

absl::StatusOr<DeviceSpan<float>> CudaKernelBackend::Output(
    CallScope& scope, absl::Span<const float> host, int64_t count, bool copy) {
  if (count == 0) return DeviceSpan<float>{};
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                         allocator_.Allocate(Bytes(count)));
  if (copy) {
    TWICE_RETURN_IF_ERROR(
        CopyToDevice(host.data(), buffer.data(), Bytes(count), stream_->get()));
  }
  return scope.Keep(std::move(buffer), count);
}

namespace {

// Copies device results back (synchronising the stream, which also
// surfaces an asynchronous kernel fault as this call's status).
[[nodiscard]] absl::Status Fetch(const Stream& stream, DeviceSpan<float> device,
                                 absl::Span<float> host) {
  if (device.size == 0) return absl::OkStatus();
  return CopyToHost(device.data, host.data(), Bytes(device.size), stream.get());
}

}  // namespace

absl::Status CudaKernelBackend::Linear(absl::Span<const float> x, int64_t m,
                                       int64_t k, const Tensor& weight_tensor,
                                       int64_t n, absl::Span<const float> bias,
                                       absl::Span<float> y) {
  // The offload path takes host f32 weights (it rounds them to bf16 on the
  // device); other dtypes are the CPU's until the device-resident executor.
  if (weight_tensor.dtype() != DType::kF32 ||
      weight_tensor.device() != Device::kCpu) {
    Declined().IgnoreError();
    return UnsupportedTensor("Linear", "weight", weight_tensor);
  }
  const absl::Span<const float> weight = weight_tensor.span();
  // cuBLASLt's bf16 GEMM needs 16-byte aligned rows (GemmRunner).
  if (k % 8 != 0 || n % 8 != 0) return Declined();
  std::lock_guard<std::mutex> lock(mu_);
  CallScope scope;
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const Bf16> dx, InputBf16(scope, x, m * k));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const Bf16> dw,
                         InputBf16(scope, weight, n * k));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> db,
                         Input(scope, bias, static_cast<int64_t>(bias.size())));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dy, Output(scope, y, m * n, false));
  TWICE_RETURN_IF_ERROR(
      Ran(gemm_->Linear(dx, dw, db, {m, n, k}, /*accumulate=*/false, dy)));
  return Fetch(*stream_, dy, y);
}

absl::Status CudaKernelBackend::RmsNorm(absl::Span<const float> x, int64_t rows,
                                        int64_t dim,
                                        absl::Span<const float> weight,
                                        float eps, absl::Span<float> y) {
  std::lock_guard<std::mutex> lock(mu_);
  CallScope scope;
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dx,
                         Input(scope, x, rows * dim));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dw, Input(scope, weight, dim));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dy,
                         Output(scope, y, rows * dim, false));
  TWICE_RETURN_IF_ERROR(
      Ran(cuda::RmsNorm(*stream_, dx, rows, dim, dw, eps, dy)));
  return Fetch(*stream_, dy, y);
}

absl::Status CudaKernelBackend::RopeRotateHalf(absl::Span<float> x,
                                               int64_t rows, int64_t row_stride,
                                               int64_t heads, int64_t head_dim,
                                               int64_t start_pos, float base) {
  std::lock_guard<std::mutex> lock(mu_);
  CallScope scope;
  const int64_t extent = StridedExtent(rows, heads * head_dim, row_stride);
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dx, Output(scope, x, extent, true));
  TWICE_RETURN_IF_ERROR(Ran(cuda::RopeRotateHalf(
      *stream_, dx, rows, row_stride, heads, head_dim, start_pos, base)));
  return Fetch(*stream_, dx, x);
}

absl::Status CudaKernelBackend::SiluMul(absl::Span<const float> gate,
                                        int64_t gate_stride,
                                        absl::Span<const float> mult,
                                        int64_t mult_stride, int64_t rows,
                                        int64_t cols, absl::Span<float> out) {
  std::lock_guard<std::mutex> lock(mu_);
  CallScope scope;
  TWICE_ASSIGN_OR_RETURN(
      DeviceSpan<const float> dg,
      Input(scope, gate, StridedExtent(rows, cols, gate_stride)));
  TWICE_ASSIGN_OR_RETURN(
      DeviceSpan<const float> dm,
      Input(scope, mult, StridedExtent(rows, cols, mult_stride)));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dout,
                         Output(scope, out, rows * cols, false));
  TWICE_RETURN_IF_ERROR(Ran(cuda::SiluMul(*stream_, dg, gate_stride, dm,
                                          mult_stride, rows, cols, dout)));
  return Fetch(*stream_, dout, out);
}

absl::Status CudaKernelBackend::SwiGlu(absl::Span<const float> u, int64_t rows,
                                       int64_t hidden, absl::Span<float> out) {
  std::lock_guard<std::mutex> lock(mu_);
  CallScope scope;
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> du,
                         Input(scope, u, rows * 2 * hidden));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dout,
                         Output(scope, out, rows * hidden, false));
  TWICE_RETURN_IF_ERROR(Ran(cuda::SwiGlu(*stream_, du, rows, hidden, dout)));
  return Fetch(*stream_, dout, out);
}

absl::Status CudaKernelBackend::TaylorFeatureMap(absl::Span<const float> x,
                                                 int64_t rows,
                                                 int64_t feature_dim,
                                                 absl::Span<float> out) {
  if (feature_dim > 1024) return Declined();
  std::lock_guard<std::mutex> lock(mu_);
  CallScope scope;
  const int64_t width = 1 + feature_dim + feature_dim * feature_dim;
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dx,
                         Input(scope, x, rows * feature_dim));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dout,
                         Output(scope, out, rows * width, false));
  TWICE_RETURN_IF_ERROR(
      Ran(cuda::TaylorFeatureMap(*stream_, dx, rows, feature_dim, dout)));
  return Fetch(*stream_, dout, out);
}

absl::Status CudaKernelBackend::CausalConv1d(
    absl::Span<const float> x, int64_t tokens, int64_t channels,
    int64_t x_stride, absl::Span<const float> weight, int64_t kernel_size,
    absl::Span<float> tail, absl::Span<float> out) {
  if (kernel_size > 64) return Declined();
  std::lock_guard<std::mutex> lock(mu_);
  CallScope scope;
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
  TWICE_RETURN_IF_ERROR(Ran(cuda::CausalConv1d(
      *stream_, dx, tokens, channels, x_stride, dw, kernel_size, dtail, dout)));
  TWICE_RETURN_IF_ERROR(Fetch(*stream_, dout, out));
  return Fetch(*stream_, dtail, tail);
}

absl::Status CudaKernelBackend::PrefixLinearAttentionPrefill(
    absl::Span<const float> phi_q, absl::Span<const float> phi_k,
    absl::Span<const float> v, int64_t tokens,
    absl::Span<const float> phi_k_enc, absl::Span<const float> v_enc,
    int64_t encoder_tokens, const LinearAttentionDims& dims, float eps,
    absl::Span<float> kv_state, absl::Span<float> k_state,
    absl::Span<float> y) {
  if (dims.feature_size > 2048 || dims.heads > 65535 || dims.head_dim > 65535) {
    return Declined();
  }
  std::lock_guard<std::mutex> lock(mu_);
  CallScope scope;
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
  TWICE_RETURN_IF_ERROR(Ran(
      cuda::FeaturizedLinearAttention(*stream_, dq, dk, dv, tokens, dke, dve,
                                      encoder_tokens, dims, eps, dkv, dz, dy)));
  TWICE_RETURN_IF_ERROR(Fetch(*stream_, dy, y));
  TWICE_RETURN_IF_ERROR(Fetch(*stream_, dkv, kv_state));
  return Fetch(*stream_, dz, k_state);
}

absl::Status CudaKernelBackend::SoftmaxAttention(
    absl::Span<const float> q, int64_t q_stride, absl::Span<const float> k,
    absl::Span<const float> v, int64_t tokens, int64_t past, int64_t q_row,
    int64_t kv_row, absl::Span<float> out, const SoftmaxLaunch& launch) {
  std::lock_guard<std::mutex> lock(mu_);
  CallScope scope;
  TWICE_ASSIGN_OR_RETURN(
      DeviceSpan<const float> dq,
      Input(scope, q, StridedExtent(tokens, q_row, q_stride)));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dk,
                         Input(scope, k, (past + tokens) * kv_row));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dv,
                         Input(scope, v, (past + tokens) * kv_row));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dout,
                         Output(scope, out, tokens * q_row, false));
  TWICE_RETURN_IF_ERROR(Ran(launch(dq, dk, dv, dout)));
  return Fetch(*stream_, dout, out);
}

absl::Status CudaKernelBackend::WindowAttention(
    absl::Span<const float> q, int64_t q_stride, absl::Span<const float> k,
    absl::Span<const float> v, const WindowAttentionDims& dims, float scale,
    absl::Span<float> out) {
  if (!AttentionHeadDimOk(dims.head_dim)) return Declined();
  const int64_t row = dims.heads * dims.head_dim;
  return SoftmaxAttention(
      q, q_stride, k, v, dims.tokens, dims.past, row, row, out,
      [&](DeviceSpan<const float> dq, DeviceSpan<const float> dk,
          DeviceSpan<const float> dv, DeviceSpan<float> dout) {
        return cuda::WindowAttention(*stream_, dq, q_stride, dk, dv, dims,
                                     scale, dout);
      });
}

absl::Status CudaKernelBackend::CausalGqaAttention(
    absl::Span<const float> q, int64_t q_stride, absl::Span<const float> k,
    absl::Span<const float> v, const CausalAttentionDims& dims, float scale,
    absl::Span<float> out) {
  if (!AttentionHeadDimOk(dims.head_dim)) return Declined();
  return SoftmaxAttention(
      q, q_stride, k, v, dims.tokens, dims.past, dims.heads * dims.head_dim,
      dims.kv_heads * dims.head_dim, out,
      [&](DeviceSpan<const float> dq, DeviceSpan<const float> dk,
          DeviceSpan<const float> dv, DeviceSpan<float> dout) {
        return cuda::CausalGqaAttention(*stream_, dq, q_stride, dk, dv, dims,
                                        scale, dout);
      });
}

absl::Status CudaKernelBackend::RatChunkAttention(
    StridedRows q, StridedRows own_k, StridedRows own_v, StridedRows chunk_k,
    StridedRows chunk_v, absl::Span<const int64_t> visible,
    const RatAttentionDims& dims, float scale, absl::Span<float> out) {
  if (!AttentionHeadDimOk(dims.head_dim)) return Declined();
  std::lock_guard<std::mutex> lock(mu_);
  CallScope scope;
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
      Ran(cuda::RatChunkAttention(*stream_, allocator_, dq, dok, dov, dck, dcv,
                                  visible, dims, scale, dout)));
  return Fetch(*stream_, dout, out);
}

absl::Status CudaKernelBackend::SsdChunkScan(
    const SsdShape& shape, int64_t tokens, int64_t chunk,
    absl::Span<const float> x, int64_t x_stride, absl::Span<const float> b,
    absl::Span<const float> c, int64_t bc_stride, absl::Span<const float> dt,
    absl::Span<const float> a, absl::Span<const float> d,
    absl::Span<float> state, absl::Span<float> y) {
  if (shape.state > 128 || shape.heads > 65535 || shape.head_dim > 1024) {
    return Declined();
  }
  std::lock_guard<std::mutex> lock(mu_);
  CallScope scope;
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
      Ran(cuda::SsdChunkScan(*stream_, shape, tokens, chunk, dx, x_stride, db,
                             dc, bc_stride, ddt, da, dd, dstate, dy)));
  TWICE_RETURN_IF_ERROR(Fetch(*stream_, dy, y));
  return Fetch(*stream_, dstate, state);
}

}  // namespace twice::kernels::cuda
