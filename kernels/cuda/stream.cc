#include "kernels/cuda/stream.h"

#include "kernels/cuda/cuda_status.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {

absl::StatusOr<std::unique_ptr<Stream>> Stream::Create(int device) {
  TWICE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  TWICE_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return std::unique_ptr<Stream>(new Stream(stream, device));
}

Stream::~Stream() {
  cudaStreamSynchronize(stream_);
  cudaStreamDestroy(stream_);
}

absl::Status Stream::Synchronize() const {
  TWICE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status Stream::Upload(const void* host, void* device,
                            int64_t bytes) const {
  if (uploads_ == nullptr) {
    TWICE_ASSIGN_OR_RETURN(uploads_, UploadRing::Create(stream_));
  }
  return uploads_->Upload(host, device, bytes);
}

absl::StatusOr<std::unique_ptr<EventTimer>> EventTimer::Create() {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  TWICE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  if (const cudaError_t e = cudaEventCreate(&stop); e != cudaSuccess) {
    cudaEventDestroy(start);
    return CudaStatus(e, "cudaEventCreate");
  }
  return std::unique_ptr<EventTimer>(new EventTimer(start, stop));
}

EventTimer::~EventTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

absl::Status EventTimer::Start(const Stream& stream) {
  TWICE_CUDA_RETURN_IF_ERROR(cudaEventRecord(start_, stream.get()));
  return absl::OkStatus();
}

absl::Status EventTimer::Stop(const Stream& stream) {
  TWICE_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop_, stream.get()));
  return absl::OkStatus();
}

absl::StatusOr<float> EventTimer::ElapsedMs() const {
  TWICE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop_));
  float ms = 0.0f;
  TWICE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start_, stop_));
  return ms;
}

}  // namespace twice::kernels::cuda
