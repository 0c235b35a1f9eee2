#include "kernels/cuda/upload_ring.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/cuda_status.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {

absl::StatusOr<std::unique_ptr<UploadRing>> UploadRing::Create(
    cudaStream_t stream, int64_t max_bytes) {
  if (max_bytes < kPinnedAlignment) {
    return absl::InvalidArgumentError("UploadRing: max_bytes < 64");
  }
  cudaEvent_t drained = nullptr;
  TWICE_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&drained, cudaEventDisableTiming));
  return std::unique_ptr<UploadRing>(
      new UploadRing(stream, drained, PinnedAligned(max_bytes)));
}

UploadRing::~UploadRing() {
  if (used_ > 0) cudaEventSynchronize(drained_);  // errors at teardown
  cudaEventDestroy(drained_);
}

absl::Status UploadRing::Reserve(int64_t bytes) {
  if (used_ + bytes <= buffer_.bytes()) return absl::OkStatus();
  // Every transfer from the ring is queued on stream_ before drained_ was
  // last recorded, so once the event completes none reads it any more.
  if (used_ > 0) {
    TWICE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(drained_));
    ++waits_;
    used_ = 0;
  }
  if (buffer_.bytes() < max_bytes_) {
    const int64_t grown = std::min(
        max_bytes_,
        std::max({PinnedAligned(bytes), 2 * buffer_.bytes(), kFirstBytes}));
    buffer_ = PinnedBuffer();  // the old one goes first
    TWICE_ASSIGN_OR_RETURN(buffer_, PinnedBuffer::Allocate(grown));
  }
  return absl::OkStatus();
}

absl::Status UploadRing::Upload(const void* host, void* device, int64_t bytes) {
  if (bytes < 0) return absl::InvalidArgumentError("Upload: negative size");
  if (bytes > 0 && (host == nullptr || device == nullptr)) {
    return absl::InvalidArgumentError("Upload: null pointer");
  }
  // A graph would replay the copy from whatever the ring holds then.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TWICE_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream_, &capture));
  if (capture != cudaStreamCaptureStatusNone) {
    return absl::FailedPreconditionError(
        "Upload: a copy from the host cannot be recorded in a graph");
  }
  const char* from = static_cast<const char*>(host);
  char* to = static_cast<char*>(device);
  while (bytes > 0) {
    const int64_t piece = std::min(bytes, max_bytes_);
    TWICE_RETURN_IF_ERROR(Reserve(piece));
    char* staged = buffer_.data() + used_;
    std::memcpy(staged, from, static_cast<size_t>(piece));
    TWICE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(to, staged, static_cast<size_t>(piece),
                        cudaMemcpyHostToDevice, stream_));
    // The region is taken from here on, whatever happens next.
    used_ += PinnedAligned(piece);
    if (const cudaError_t e = cudaEventRecord(drained_, stream_);
        e != cudaSuccess) {
      // drained_ does not cover this transfer: wait for it before the
      // region can be reused.
      (void)cudaStreamSynchronize(stream_);
      return CudaStatus(e, "cudaEventRecord");
    }
    from += piece;
    to += piece;
    bytes -= piece;
  }
  return absl::OkStatus();
}

}  // namespace twice::kernels::cuda
