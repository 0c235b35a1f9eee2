#include "kernels/cuda/cuda_kernel_backend.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/launch.h"
#include "kernels/i8_layout.h"
#include "kernels/immutable_host_regions.h"
#include "kernels/status_macros.h"
#include "kernels/taylor_feature_map.h"

namespace twice::kernels::cuda {

// Members in this order so that the GEMM runner (its workspace) goes
// before the stream, and both before the allocator that owns the memory.
struct CudaKernelBackend::Lane {
  explicit Lane(int device) : allocator(device) {}
  DeviceAllocator allocator;
  std::unique_ptr<Stream> stream;
  std::unique_ptr<GemmRunner> gemm;
};

class CudaKernelBackend::LaneLease {
 public:
  LaneLease(CudaKernelBackend* owner, Lane* lane)
      : owner_(owner), lane_(lane) {}
  LaneLease(LaneLease&& other) noexcept
      : owner_(other.owner_), lane_(std::exchange(other.lane_, nullptr)) {}
  LaneLease& operator=(LaneLease&&) = delete;
  ~LaneLease() {
    if (lane_ == nullptr) return;
    {
      std::lock_guard<std::mutex> lock(owner_->lanes_mu_);
      owner_->free_lanes_.push_back(lane_);
    }
    owner_->lane_freed_.notify_one();
  }
  Lane& lane() const { return *lane_; }

 private:
  CudaKernelBackend* owner_;
  Lane* lane_;
};

// Buffers of one call come from its lane's allocator, whose reuse is
// ordered on the lane's one stream (device_memory.h); cached weights the
// call reads are held until it ends. The destructor waits for the lane's
// queued work, so that an early error return cannot free memory a kernel
// still reads, nor hand the lane on with work in flight.
class CudaKernelBackend::CallScope {
 public:
  CallScope(Lane& lane, KernelStatsCounters& counters)
      : lane_(lane), counters_(counters) {}
  ~CallScope() { (void)cudaStreamSynchronize(lane_.stream->get()); }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

  const Stream& stream() const { return *lane_.stream; }
  void* raw_stream() const { return lane_.stream->get(); }
  GemmRunner& gemm() const { return *lane_.gemm; }
  DeviceAllocator& allocator() const { return lane_.allocator; }
  KernelStatsCounters& counters() const { return counters_; }

  template <typename T>
  DeviceSpan<T> Keep(DeviceBuffer buffer, int64_t count) {
    buffers_.push_back(std::move(buffer));
    return {buffers_.back().span<T>().data, count};
  }
  void Hold(std::shared_ptr<const DeviceBuffer> weight) {
    weights_.push_back(std::move(weight));
  }
  // Uploads host bytes into a new buffer of this call.
  [[nodiscard]] absl::StatusOr<void*> Stage(const void* host, int64_t bytes) {
    TWICE_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                           lane_.allocator.Allocate(bytes));
    TWICE_RETURN_IF_ERROR(
        CopyToDevice(host, buffer.data(), bytes, lane_.stream->get()));
    buffers_.push_back(std::move(buffer));
    return buffers_.back().data();
  }

 private:
  Lane& lane_;
  KernelStatsCounters& counters_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<std::shared_ptr<const DeviceBuffer>> weights_;
};

namespace {

int64_t Bytes(int64_t floats) {
  return floats * static_cast<int64_t>(sizeof(float));
}

// Scales of an I8 tensor: one per block of each row (kernels/dtype.h).
int64_t ScaleCount(const Tensor& t) {
  const int64_t rows = t.dim(0);
  return rows * I8BlocksPerRow(rows == 0 ? 0 : t.size() / rows);
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
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer out,
                         allocator.AllocateArray<Bf16>(count));
  const DeviceSpan<Bf16> bf16 = out.span<Bf16>();
  switch (host.dtype()) {
    case DType::kBF16:
      TWICE_RETURN_IF_ERROR(CopyToDevice(
          host.raw_data(), out.data(), ElementBytes(host), scope.raw_stream()));
      break;
    case DType::kF32: {
      TWICE_ASSIGN_OR_RETURN(void* staged,
                             scope.Stage(host.raw_data(), ElementBytes(host)));
      TWICE_RETURN_IF_ERROR(ConvertToBf16(
          scope.stream(), {static_cast<const float*>(staged), count}, bf16));
      break;
    }
    case DType::kF16: {
      TWICE_ASSIGN_OR_RETURN(void* staged,
                             scope.Stage(host.raw_data(), ElementBytes(host)));
      TWICE_RETURN_IF_ERROR(ConvertF16ToBf16(
          scope.stream(), {static_cast<const uint16_t*>(staged), count}, bf16));
      break;
    }
    case DType::kI8: {
      const int64_t rows = host.dim(0);
      const int64_t cols = rows == 0 ? 0 : count / rows;
      // The device kernel takes rows; the host keeps I8 in row groups
      // (kernels/i8_layout.h).
      const I8Arrays row_major =
          UnpackI8Rows(static_cast<const int8_t*>(host.raw_data()),
                       host.scales(), rows, cols);
      TWICE_ASSIGN_OR_RETURN(void* values, scope.Stage(row_major.values.data(),
                                                       ElementBytes(host)));
      TWICE_ASSIGN_OR_RETURN(
          void* scales,
          scope.Stage(row_major.scales.data(), Bytes(ScaleCount(host))));
      TWICE_RETURN_IF_ERROR(DequantizeRowsToBf16(
          scope.stream(), {static_cast<const int8_t*>(values), count},
          {static_cast<const float*>(scales), ScaleCount(host)}, rows, cols,
          bf16));
      // row_major is freed on return: the copies must have read it.
      TWICE_RETURN_IF_ERROR(scope.stream().Synchronize());
      break;
    }
  }
  return out;
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
                                        ? Bytes(ScaleCount(host))
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
      fused.heads > 65535) {
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
