// Stream: one owned cudaStream_t (non-blocking), destroyed with the object.
// Every kernel launcher and GemmRunner takes the stream it queues work on;
// work on one stream runs in order. Not thread-safe to share between threads
// that enqueue concurrently without their own ordering (Upload included).
#ifndef TWICE_KERNELS_CUDA_STREAM_H_
#define TWICE_KERNELS_CUDA_STREAM_H_

#include <cuda_runtime_api.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/upload_ring.h"

namespace twice::kernels::cuda {

class Stream {
 public:
  // FAILED_PRECONDITION when `device` does not exist (no GPU or driver).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Stream>> Create(
      int device = 0);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }
  // Waits for all queued work; reports any asynchronous kernel error.
  [[nodiscard]] absl::Status Synchronize() const;
  // Queues a copy of `bytes` from `host` (any host memory, read before
  // this returns) into `device` without waiting for the stream: through
  // the stream's ring of page-locked memory (upload_ring.h).
  [[nodiscard]] absl::Status Upload(const void* host, void* device,
                                    int64_t bytes) const;

 private:
  Stream(cudaStream_t stream, int device) : stream_(stream), device_(device) {}
  cudaStream_t stream_;
  int device_;
  // Made on the first Upload (a stream that never uploads locks no host
  // memory); const methods queue work too, hence mutable.
  mutable std::unique_ptr<UploadRing> uploads_;
};

// CUDA events around queued work: elapsed milliseconds between Record()s.
class EventTimer {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<EventTimer>> Create();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  [[nodiscard]] absl::Status Start(const Stream& stream);
  [[nodiscard]] absl::Status Stop(const Stream& stream);
  // Waits for the stop event.
  [[nodiscard]] absl::StatusOr<float> ElapsedMs() const;

 private:
  EventTimer(cudaEvent_t start, cudaEvent_t stop)
      : start_(start), stop_(stop) {}
  cudaEvent_t start_;
  cudaEvent_t stop_;
};

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_STREAM_H_
