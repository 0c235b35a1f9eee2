#include "kernels/cuda/pinned_buffer.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_status.h"

namespace twice::kernels::cuda {

absl::StatusOr<PinnedBuffer> PinnedBuffer::Allocate(int64_t bytes) {
  if (bytes < 0) {
    return absl::InvalidArgumentError("PinnedBuffer: negative size");
  }
  PinnedBuffer buffer;
  if (bytes == 0) return buffer;
  void* data = nullptr;
  // Portable: page-locked for every device, not only the thread's current
  // one (a stream on device 1 may be driven from a thread whose current
  // device is 0).
  TWICE_CUDA_RETURN_IF_ERROR(
      cudaHostAlloc(&data, static_cast<size_t>(bytes), cudaHostAllocPortable));
  buffer.data_ = static_cast<char*>(data);
  buffer.bytes_ = bytes;
  return buffer;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);  // errors at teardown: ignored
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace twice::kernels::cuda
