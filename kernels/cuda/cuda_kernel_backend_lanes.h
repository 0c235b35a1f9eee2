// The per-call plumbing of CudaKernelBackend (cuda_kernel_backend.h), shared
// by the files that implement its ops: a lane (stream, GEMM runner,
// allocator), the lease that returns it to the pool, and the scope that
// owns a call's device buffers. Internal to twice_kernels_cuda.
#ifndef TWICE_KERNELS_CUDA_CUDA_KERNEL_BACKEND_LANES_H_
#define TWICE_KERNELS_CUDA_CUDA_KERNEL_BACKEND_LANES_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_kernel_backend.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/stream.h"
#include "kernels/status_macros.h"

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
  // Uploads host bytes into a new buffer of this call (queued through the
  // lane stream's page-locked ring: the call's earlier work is not
  // drained).
  [[nodiscard]] absl::StatusOr<void*> Stage(const void* host, int64_t bytes) {
    TWICE_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                           lane_.allocator.Allocate(bytes));
    TWICE_RETURN_IF_ERROR(lane_.stream->Upload(host, buffer.data(), bytes));
    buffers_.push_back(std::move(buffer));
    return buffers_.back().data();
  }

 private:
  Lane& lane_;
  KernelStatsCounters& counters_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<std::shared_ptr<const DeviceBuffer>> weights_;
};

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_CUDA_KERNEL_BACKEND_LANES_H_
