#include "kernels/cuda/cuda_kernel_backend.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_kernel_backend_lanes.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/weight_upload.h"
#include "kernels/immutable_host_regions.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {

namespace {

int64_t Bytes(int64_t floats) {
  return floats * static_cast<int64_t>(sizeof(float));
}

// Bytes of a tensor's elements as stored (scales of I8 not included).
int64_t ElementBytes(const Tensor& t) {
  return t.size() * DTypeSize(t.dtype());
}

}  // namespace

absl::StatusOr<std::shared_ptr<CudaKernelBackend>> CudaKernelBackend::Create(
    int device, int max_lanes) {
  if (device < 0 || device >= DeviceCount()) {
    return absl::FailedPreconditionError(
        absl::StrCat("CUDA device ", device, " is not available (",
                     DeviceCount(), " usable device(s) visible)"));
  }
  if (max_lanes < 1) {
    return absl::InvalidArgumentError("CUDA backend: max_lanes must be >= 1");
  }
  std::shared_ptr<CudaKernelBackend> backend(new CudaKernelBackend(
      absl::StrCat("cuda:", device, " (", DeviceName(device), ")"), device,
      max_lanes));
  // The first lane now: a device that cannot make a stream or load
  // cuBLASLt fails here, at startup, not on the first request.
  TWICE_ASSIGN_OR_RETURN(std::unique_ptr<Lane> lane, backend->NewLane());
  backend->free_lanes_.push_back(lane.get());
  backend->lanes_.push_back(std::move(lane));
  return backend;
}

CudaKernelBackend::CudaKernelBackend(std::string name, int device,
                                     int max_lanes)
    : name_(std::move(name)),
      device_(device),
      max_lanes_(max_lanes),
      fused_linear_attention_fits_(FusedLinearAttentionFits(device)),
      weight_allocator_(device) {}

CudaKernelBackend::~CudaKernelBackend() {
  // Device memory goes back before the allocators go.
  weights_.clear();
  lanes_.clear();
}

absl::StatusOr<std::unique_ptr<CudaKernelBackend::Lane>>
CudaKernelBackend::NewLane() {
  auto lane = std::make_unique<Lane>(device_);
  TWICE_ASSIGN_OR_RETURN(lane->stream, Stream::Create(device_));
  TWICE_ASSIGN_OR_RETURN(lane->gemm,
                         GemmRunner::Create(*lane->stream, lane->allocator));
  return lane;
}

absl::StatusOr<CudaKernelBackend::LaneLease> CudaKernelBackend::AcquireLane() {
  // The runtime's current device is per host thread; a request thread may
  // never have set it.
  TWICE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  std::unique_lock<std::mutex> lock(lanes_mu_);
  while (true) {
    if (!free_lanes_.empty()) {
      Lane* lane = free_lanes_.back();
      free_lanes_.pop_back();
      return LaneLease(this, lane);
    }
    if (static_cast<int>(lanes_.size()) < max_lanes_) {
      TWICE_ASSIGN_OR_RETURN(std::unique_ptr<Lane> lane, NewLane());
      lanes_.push_back(std::move(lane));
      return LaneLease(this, lanes_.back().get());
    }
    lane_freed_.wait(lock);
  }
}

KernelBackendStats CudaKernelBackend::stats() const {
  return counters_.Snapshot();
}

int64_t CudaKernelBackend::cached_weight_bytes() const {
  std::lock_guard<std::mutex> lock(weights_mu_);
  return cached_weight_bytes_;
}

int CudaKernelBackend::lanes() const {
  std::lock_guard<std::mutex> lock(lanes_mu_);
  return static_cast<int>(lanes_.size());
}

absl::Status CudaKernelBackend::Declined(KernelOp op) {
  counters_.Declined(op);
  return absl::UnimplementedError(
      absl::StrCat(std::string(KernelOpName(op)),
                   ": shape not covered by the CUDA kernels"));
}

absl::Status CudaKernelBackend::Ran(KernelOp op, absl::Status status) {
  if (status.ok()) counters_.Ran(op);
  // An UNIMPLEMENTED from a device op would silently rerun on the CPU: a
  // device op never means "declined", so report it as the internal error
  // it is.
  if (absl::IsUnimplemented(status)) {
    return absl::InternalError(
        absl::StrCat("CUDA backend: ", status.message()));
  }
  return status;
}

void CudaKernelBackend::PruneCacheLocked() {
  for (auto it = weights_.begin(); it != weights_.end();) {
    const CachedWeight& entry = it->second;
    const bool live = entry.region_id != 0
                          ? ImmutableHostRegionLive(entry.region_id)
                          : !entry.owner.expired();
    if (live) {
      ++it;
    } else {
      cached_weight_bytes_ -= entry.buffer->bytes();
      it = weights_.erase(it);
    }
  }
}

absl::StatusOr<DeviceBuffer> CudaKernelBackend::Upload(
    CallScope& scope, DeviceAllocator& allocator, const Tensor& host,
    DType dtype) {
  const int64_t count = host.size();
  if (dtype == DType::kF32) {
    if (host.dtype() != DType::kF32) {
      return UnsupportedTensor("CUDA upload as f32", "tensor", host);
    }
    TWICE_ASSIGN_OR_RETURN(DeviceBuffer out, allocator.Allocate(Bytes(count)));
    TWICE_RETURN_IF_ERROR(CopyToDevice(host.raw_data(), out.data(),
                                       Bytes(count), scope.raw_stream()));
    return out;
  }
  return UploadWeightAsBf16(scope.stream(), allocator, host,
                            [&scope](const void* bytes, int64_t size) {
                              return scope.Stage(bytes, size);
                            });
}

absl::StatusOr<std::shared_ptr<const DeviceBuffer>> CudaKernelBackend::Cached(
    CallScope& scope, const Tensor& host, DType dtype) {
  const int64_t bytes = ElementBytes(host);
  CachedWeight identity;
  if (host.shared_storage() != nullptr) {
    identity.owner = host.shared_storage();
  } else if (host.is_view()) {
    const std::optional<ImmutableHostRegion> region =
        FindImmutableHostRegion(host.raw_data(), static_cast<size_t>(bytes));
    if (!region.has_value()) return nullptr;
    identity.region_id = region->id;
  } else {
    return nullptr;  // owning memory may change between calls
  }
  const WeightKey key{host.raw_data(), bytes, dtype};
  std::lock_guard<std::mutex> lock(weights_mu_);
  if (auto it = weights_.find(key); it != weights_.end()) {
    const CachedWeight& entry = it->second;
    // A live owner at this address is the same buffer (an expired one may
    // have been replaced by another allocation at the same address).
    const bool same = identity.region_id != 0
                          ? entry.region_id == identity.region_id
                          : entry.region_id == 0 && !entry.owner.expired();
    if (same) return entry.buffer;
  }
  PruneCacheLocked();
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                         Upload(scope, weight_allocator_, host, dtype));
  // Other lanes read the copy on their own streams: it must be complete.
  TWICE_RETURN_IF_ERROR(scope.stream().Synchronize());
  counters_.UploadedWeight(bytes + (host.dtype() == DType::kI8
                                        ? Bytes(I8ScaleCountOf(host))
                                        : int64_t{0}));
  identity.buffer = std::make_shared<const DeviceBuffer>(std::move(buffer));
  cached_weight_bytes_ += identity.buffer->bytes();
  std::shared_ptr<const DeviceBuffer> result = identity.buffer;
  weights_.insert_or_assign(key, std::move(identity));
  return result;
}

absl::StatusOr<DeviceSpan<const float>> CudaKernelBackend::Input(
    CallScope& scope, absl::Span<const float> host, int64_t count) {
  if (count == 0) return DeviceSpan<const float>{};
  TWICE_ASSIGN_OR_RETURN(
      std::shared_ptr<const DeviceBuffer> cached,
      Cached(scope, Tensor::View(host.data(), {count}), DType::kF32));
  if (cached != nullptr) {
    const float* data = cached->span<float>().data;
    scope.Hold(std::move(cached));
    return DeviceSpan<const float>{data, count};
  }
  TWICE_ASSIGN_OR_RETURN(void* staged, scope.Stage(host.data(), Bytes(count)));
  counters_.CopiedToDevice(Bytes(count));
  return DeviceSpan<const float>{static_cast<const float*>(staged), count};
}

absl::StatusOr<DeviceSpan<const Bf16>> CudaKernelBackend::InputBf16(
    CallScope& scope, absl::Span<const float> host, int64_t count) {
  if (count == 0) return DeviceSpan<const Bf16>{};
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> f32,
                         Input(scope, host, count));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                         scope.allocator().AllocateArray<Bf16>(count));
  DeviceSpan<Bf16> out = scope.Keep<Bf16>(std::move(buffer), count);
  TWICE_RETURN_IF_ERROR(ConvertToBf16(scope.stream(), f32, out));
  return DeviceSpan<const Bf16>(out);
}

absl::StatusOr<DeviceSpan<const Bf16>> CudaKernelBackend::WeightBf16(
    CallScope& scope, const Tensor& weight) {
  const int64_t count = weight.size();
  if (count == 0) return DeviceSpan<const Bf16>{};
  TWICE_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceBuffer> cached,
                         Cached(scope, weight, DType::kBF16));
  if (cached != nullptr) {
    const Bf16* data = cached->span<Bf16>().data;
    scope.Hold(std::move(cached));
    return DeviceSpan<const Bf16>{data, count};
  }
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer buffer, Upload(scope, scope.allocator(),
                                                     weight, DType::kBF16));
  counters_.CopiedToDevice(ElementBytes(weight));
  return DeviceSpan<const Bf16>(scope.Keep<Bf16>(std::move(buffer), count));
}

absl::StatusOr<DeviceSpan<float>> CudaKernelBackend::Output(
    CallScope& scope, absl::Span<const float> host, int64_t count, bool copy) {
  if (count == 0) return DeviceSpan<float>{};
  if (copy) {
    TWICE_ASSIGN_OR_RETURN(void* staged,
                           scope.Stage(host.data(), Bytes(count)));
    counters_.CopiedToDevice(Bytes(count));
    return DeviceSpan<float>{static_cast<float*>(staged), count};
  }
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                         scope.allocator().Allocate(Bytes(count)));
  return scope.Keep<float>(std::move(buffer), count);
}

absl::Status CudaKernelBackend::Fetch(CallScope& scope,
                                      DeviceSpan<float> device,
                                      absl::Span<float> host) {
  if (device.size == 0) return absl::OkStatus();
  counters_.CopiedToHost(Bytes(device.size));
  return CopyToHost(device.data, host.data(), Bytes(device.size),
                    scope.raw_stream());
}

absl::Status CudaKernelBackend::Linear(absl::Span<const float> x, int64_t m,
                                       int64_t k, const Tensor& weight,
                                       int64_t n, absl::Span<const float> bias,
                                       absl::Span<float> y) {
  // Host weights of every dtype become bf16 on the device; device tensors
  // belong to the device-resident executor, not to this offload path.
  if (weight.device() != Device::kCpu) {
    Declined(KernelOp::kLinear).IgnoreError();
    return UnsupportedTensor("Linear", "weight", weight);
  }
  // cuBLASLt's bf16 GEMM needs 16-byte aligned rows (GemmRunner).
  if (k % 8 != 0 || n % 8 != 0) return Declined(KernelOp::kLinear);
  TWICE_ASSIGN_OR_RETURN(LaneLease lease, AcquireLane());
  CallScope scope(lease.lane(), counters_);
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const Bf16> dx, InputBf16(scope, x, m * k));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const Bf16> dw, WeightBf16(scope, weight));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> db,
                         Input(scope, bias, static_cast<int64_t>(bias.size())));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dy, Output(scope, y, m * n, false));
  TWICE_RETURN_IF_ERROR(
      Ran(KernelOp::kLinear, scope.gemm().Linear(dx, dw, db, {m, n, k},
                                                 /*accumulate=*/false, dy)));
  return Fetch(scope, dy, y);
}

absl::Status CudaKernelBackend::RmsNorm(absl::Span<const float> x, int64_t rows,
                                        int64_t dim,
                                        absl::Span<const float> weight,
                                        float eps, absl::Span<float> y) {
  TWICE_ASSIGN_OR_RETURN(LaneLease lease, AcquireLane());
  CallScope scope(lease.lane(), counters_);
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dx,
                         Input(scope, x, rows * dim));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dw, Input(scope, weight, dim));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dy,
                         Output(scope, y, rows * dim, false));
  TWICE_RETURN_IF_ERROR(
      Ran(KernelOp::kRmsNorm,
          cuda::RmsNorm(scope.stream(), dx, rows, dim, dw, eps, dy)));
  return Fetch(scope, dy, y);
}

absl::Status CudaKernelBackend::RopeRotateHalf(absl::Span<float> x,
                                               int64_t rows, int64_t row_stride,
                                               int64_t heads, int64_t head_dim,
                                               int64_t start_pos, float base) {
  TWICE_ASSIGN_OR_RETURN(LaneLease lease, AcquireLane());
  CallScope scope(lease.lane(), counters_);
  const int64_t extent = StridedExtent(rows, heads * head_dim, row_stride);
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dx, Output(scope, x, extent, true));
  TWICE_RETURN_IF_ERROR(
      Ran(KernelOp::kRopeRotateHalf,
          cuda::RopeRotateHalf(scope.stream(), dx, rows, row_stride, heads,
                               head_dim, start_pos, base)));
  return Fetch(scope, dx, x);
}

absl::Status CudaKernelBackend::SiluMul(absl::Span<const float> gate,
                                        int64_t gate_stride,
                                        absl::Span<const float> mult,
                                        int64_t mult_stride, int64_t rows,
                                        int64_t cols, absl::Span<float> out) {
  TWICE_ASSIGN_OR_RETURN(LaneLease lease, AcquireLane());
  CallScope scope(lease.lane(), counters_);
  TWICE_ASSIGN_OR_RETURN(
      DeviceSpan<const float> dg,
      Input(scope, gate, StridedExtent(rows, cols, gate_stride)));
  TWICE_ASSIGN_OR_RETURN(
      DeviceSpan<const float> dm,
      Input(scope, mult, StridedExtent(rows, cols, mult_stride)));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dout,
                         Output(scope, out, rows * cols, false));
  TWICE_RETURN_IF_ERROR(
      Ran(KernelOp::kSiluMul, cuda::SiluMul(scope.stream(), dg, gate_stride, dm,
                                            mult_stride, rows, cols, dout)));
  return Fetch(scope, dout, out);
}

absl::Status CudaKernelBackend::SwiGlu(absl::Span<const float> u, int64_t rows,
                                       int64_t hidden, absl::Span<float> out) {
  TWICE_ASSIGN_OR_RETURN(LaneLease lease, AcquireLane());
  CallScope scope(lease.lane(), counters_);
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> du,
                         Input(scope, u, rows * 2 * hidden));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dout,
                         Output(scope, out, rows * hidden, false));
  TWICE_RETURN_IF_ERROR(Ran(
      KernelOp::kSwiGlu, cuda::SwiGlu(scope.stream(), du, rows, hidden, dout)));
  return Fetch(scope, dout, out);
}

absl::Status CudaKernelBackend::TaylorFeatureMap(absl::Span<const float> x,
                                                 int64_t rows,
                                                 int64_t feature_dim,
                                                 absl::Span<float> out) {
  if (feature_dim > 1024) return Declined(KernelOp::kTaylorFeatureMap);
  TWICE_ASSIGN_OR_RETURN(LaneLease lease, AcquireLane());
  CallScope scope(lease.lane(), counters_);
  const int64_t width = 1 + feature_dim + feature_dim * feature_dim;
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<const float> dx,
                         Input(scope, x, rows * feature_dim));
  TWICE_ASSIGN_OR_RETURN(DeviceSpan<float> dout,
                         Output(scope, out, rows * width, false));
  TWICE_RETURN_IF_ERROR(
      Ran(KernelOp::kTaylorFeatureMap,
          cuda::TaylorFeatureMap(scope.stream(), dx, rows, feature_dim, dout)));
  return Fetch(scope, dout, out);
}

}  // namespace twice::kernels::cuda
