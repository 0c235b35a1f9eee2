#include "kernels/cuda/device_memory.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "kernels/cuda/cuda_status.h"

namespace twice::kernels::cuda {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      size_class_(std::exchange(other.size_class_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    owner_ = std::exchange(other.owner_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    size_class_ = std::exchange(other.size_class_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { Reset(); }

void DeviceBuffer::Reset() {
  if (owner_ != nullptr && data_ != nullptr) {
    owner_->Release(data_, size_class_);
  }
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
  size_class_ = 0;
}

size_t DeviceAllocator::SizeClass(int64_t bytes) {
  constexpr size_t kMiB = size_t{1} << 20;
  const size_t b = static_cast<size_t>(bytes);
  if (b >= kMiB) return (b + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);
  size_t c = 256;
  while (c < b) c <<= 1;
  return c;
}

DeviceAllocator::~DeviceAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  TrimLocked();
}

absl::StatusOr<DeviceBuffer> DeviceAllocator::Allocate(int64_t bytes) {
  if (bytes < 0) {
    return absl::InvalidArgumentError("DeviceAllocator: negative size");
  }
  if (bytes == 0) return DeviceBuffer();
  const size_t size_class = SizeClass(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = free_.find(size_class);
  if (it != free_.end() && !it->second.empty()) {
    void* data = it->second.back();
    it->second.pop_back();
    bytes_cached_ -= static_cast<int64_t>(size_class);
    bytes_in_use_ += static_cast<int64_t>(size_class);
    return DeviceBuffer(this, data, bytes, size_class);
  }
  TWICE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  void* data = nullptr;
  cudaError_t error = cudaMalloc(&data, size_class);
  if (error == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    TrimLocked();  // give the cache back and try once more
    error = cudaMalloc(&data, size_class);
  }
  if (error != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus(error, "cudaMalloc");
  }
  ++malloc_calls_;
  bytes_in_use_ += static_cast<int64_t>(size_class);
  return DeviceBuffer(this, data, bytes, size_class);
}

void DeviceAllocator::Release(void* data, size_t size_class) {
  std::lock_guard<std::mutex> lock(mu_);
  free_[size_class].push_back(data);
  bytes_in_use_ -= static_cast<int64_t>(size_class);
  bytes_cached_ += static_cast<int64_t>(size_class);
}

void DeviceAllocator::Trim() {
  std::lock_guard<std::mutex> lock(mu_);
  TrimLocked();
}

void DeviceAllocator::TrimLocked() {
  for (auto& [size_class, blocks] : free_) {
    for (void* data : blocks) cudaFree(data);  // errors at teardown: ignored
  }
  free_.clear();
  bytes_cached_ = 0;
}

int64_t DeviceAllocator::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_in_use_;
}

int64_t DeviceAllocator::bytes_cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_cached_;
}

int64_t DeviceAllocator::malloc_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return malloc_calls_;
}

absl::Status CopyToDevice(const void* host, void* device, int64_t bytes,
                          void* stream) {
  if (bytes == 0) return absl::OkStatus();
  auto s = static_cast<cudaStream_t>(stream);
  TWICE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      device, host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, s));
  TWICE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return absl::OkStatus();
}

absl::Status CopyToHost(const void* device, void* host, int64_t bytes,
                        void* stream) {
  if (bytes == 0) return absl::OkStatus();
  auto s = static_cast<cudaStream_t>(stream);
  TWICE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      host, device, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, s));
  TWICE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return absl::OkStatus();
}

}  // namespace twice::kernels::cuda
