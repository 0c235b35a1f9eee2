// PinnedBuffer: page-locked host memory (cudaHostAlloc), freed with the
// object. The device reads and writes it by DMA, so a copy between it and
// device memory queues on a stream and returns at once; a copy from
// pageable memory is first staged by the driver through a buffer of its
// own and blocks the host until it is done.
#ifndef TWICE_KERNELS_CUDA_PINNED_BUFFER_H_
#define TWICE_KERNELS_CUDA_PINNED_BUFFER_H_

#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"

namespace twice::kernels::cuda {

// Transfers staged in a PinnedBuffer start on 64-byte boundaries.
inline constexpr int64_t kPinnedAlignment = 64;
inline constexpr int64_t PinnedAligned(int64_t bytes) {
  return (bytes + kPinnedAlignment - 1) / kPinnedAlignment * kPinnedAlignment;
}

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  // RESOURCE_EXHAUSTED when the host cannot lock that much memory.
  [[nodiscard]] static absl::StatusOr<PinnedBuffer> Allocate(int64_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        bytes_(std::exchange(other.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  char* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  char* data_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_PINNED_BUFFER_H_
