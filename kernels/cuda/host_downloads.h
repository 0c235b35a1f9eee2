// HostDownloads: device-to-host copies of many arrays with one wait, on a
// stream of their own, through page-locked memory (pinned_buffer.h).
// What a saved sequence state needs: its layers' arrays (two to four per
// layer) crossed one synchronous copy each, into pageable memory, on the
// stream that computes; now every copy is queued on the copy stream behind
// an event of the computing stream (so it reads what the work queued
// before it wrote, and nothing queued there is drained by the host), the
// host waits once, and moves each copy out of the staging memory into its
// destination.
// Not thread-safe: one driver at a time.
#ifndef TWICE_KERNELS_CUDA_HOST_DOWNLOADS_H_
#define TWICE_KERNELS_CUDA_HOST_DOWNLOADS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/cuda/pinned_buffer.h"
#include "kernels/cuda/stream.h"

namespace twice::kernels::cuda {

class HostDownloads {
 public:
  static constexpr int64_t kDefaultMaxStagingBytes = int64_t{16} << 20;

  struct Copy {
    const void* device = nullptr;
    void* host = nullptr;
    int64_t bytes = 0;
  };

  // A copy stream on `device`; staging memory of at most
  // `max_staging_bytes` (>= 64): a batch larger than that waits once per
  // staging's worth.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HostDownloads>> Create(
      int device, int64_t max_staging_bytes = kDefaultMaxStagingBytes);
  ~HostDownloads();
  HostDownloads(const HostDownloads&) = delete;
  HostDownloads& operator=(const HostDownloads&) = delete;

  // Copies each after the work queued on `after` so far and returns when
  // every byte is in its host destination. On an error the host
  // destinations are unspecified; nothing is left in flight.
  [[nodiscard]] absl::Status CopyAll(const Stream& after,
                                     absl::Span<const Copy> copies);

  int64_t staging_bytes() const { return staging_.bytes(); }
  // Host waits on the copy stream (one per batch that fits the staging).
  int64_t waits() const { return waits_; }

 private:
  struct Staged {
    void* host;
    int64_t offset;
    int64_t bytes;
  };
  HostDownloads(std::unique_ptr<Stream> copies, cudaEvent_t ready,
                int64_t max_staging_bytes)
      : copies_(std::move(copies)),
        ready_(ready),
        max_staging_bytes_(max_staging_bytes) {}
  // Queues the copies behind `after`'s work, draining when the staging
  // memory is full.
  [[nodiscard]] absl::Status Queue(const Stream& after,
                                   absl::Span<const Copy> copies);
  // Waits for the queued copies and moves them out of the staging memory.
  [[nodiscard]] absl::Status Drain();

  std::unique_ptr<Stream> copies_;
  cudaEvent_t ready_;  // recorded on the computing stream
  const int64_t max_staging_bytes_;
  PinnedBuffer staging_;
  std::vector<Staged> staged_;
  int64_t used_ = 0;
  int64_t waits_ = 0;
};

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_HOST_DOWNLOADS_H_
