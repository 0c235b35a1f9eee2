// UploadRing: host-to-device copies queued on one stream without waiting
// for them. Each copy moves its bytes into a ring of page-locked memory
// (pinned_buffer.h) at once, so the caller's memory is free when Upload
// returns, and queues the transfer from there; the stream orders it with
// the kernels around it. The ring is reused from its start only after the
// stream passed an event recorded behind the newest transfer, which is
// the one time an upload waits: once per ring's worth of bytes, and
// while the ring grows (doubling from 1 MiB up to its maximum). Before,
// every upload synchronised the stream, so a decode step's slot map or a
// pass's block table drained all the work queued ahead of it.
// Not thread-safe: one ring per stream, used by the stream's one driver.
#ifndef TWICE_KERNELS_CUDA_UPLOAD_RING_H_
#define TWICE_KERNELS_CUDA_UPLOAD_RING_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/pinned_buffer.h"

namespace twice::kernels::cuda {

class UploadRing {
 public:
  static constexpr int64_t kFirstBytes = int64_t{1} << 20;
  static constexpr int64_t kDefaultMaxBytes = int64_t{16} << 20;

  // `max_bytes` >= 64 bounds the ring; a larger upload goes in pieces.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<UploadRing>> Create(
      cudaStream_t stream, int64_t max_bytes = kDefaultMaxBytes);
  // Waits for the transfers still reading the ring.
  ~UploadRing();
  UploadRing(const UploadRing&) = delete;
  UploadRing& operator=(const UploadRing&) = delete;

  // Queues `bytes` from `host` (any host memory, read before this
  // returns) into `device` on the ring's stream. FAILED_PRECONDITION while
  // the stream is being captured into a graph.
  [[nodiscard]] absl::Status Upload(const void* host, void* device,
                                    int64_t bytes);

  int64_t capacity() const { return buffer_.bytes(); }
  // Times an upload waited for the stream to pass the ring's transfers.
  int64_t waits() const { return waits_; }

 private:
  UploadRing(cudaStream_t stream, cudaEvent_t drained, int64_t max_bytes)
      : stream_(stream), drained_(drained), max_bytes_(max_bytes) {}
  // Room for `bytes` (<= max_bytes_) at used_: waits for the ring's
  // transfers and starts over (grown if it may) when the rest is too small.
  [[nodiscard]] absl::Status Reserve(int64_t bytes);

  cudaStream_t stream_;
  cudaEvent_t drained_;  // recorded behind the newest transfer
  const int64_t max_bytes_;
  PinnedBuffer buffer_;
  int64_t used_ = 0;  // 0: no transfer reads the ring
  int64_t waits_ = 0;
};

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_UPLOAD_RING_H_
