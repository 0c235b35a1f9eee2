#include "kernels/cuda/host_downloads.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/cuda/cuda_status.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {

absl::StatusOr<std::unique_ptr<HostDownloads>> HostDownloads::Create(
    int device, int64_t max_staging_bytes) {
  if (max_staging_bytes < kPinnedAlignment) {
    return absl::InvalidArgumentError("HostDownloads: max staging < 64");
  }
  TWICE_ASSIGN_OR_RETURN(std::unique_ptr<Stream> copies,
                         Stream::Create(device));
  cudaEvent_t ready = nullptr;
  TWICE_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  return std::unique_ptr<HostDownloads>(new HostDownloads(
      std::move(copies), ready, PinnedAligned(max_staging_bytes)));
}

HostDownloads::~HostDownloads() {
  (void)copies_->Synchronize();  // errors at teardown: ignored
  cudaEventDestroy(ready_);
}

absl::Status HostDownloads::CopyAll(const Stream& after,
                                    absl::Span<const Copy> copies) {
  int64_t total = 0;
  for (const Copy& c : copies) {
    if (c.bytes < 0 ||
        (c.bytes > 0 && (c.device == nullptr || c.host == nullptr))) {
      return absl::InvalidArgumentError(
          "HostDownloads: a copy has a negative size or a null pointer");
    }
    total += PinnedAligned(c.bytes);
  }
  if (total == 0) return absl::OkStatus();
  // The previous batch has drained, so the staging memory is free.
  const int64_t wanted = std::min(total, max_staging_bytes_);
  if (staging_.bytes() < wanted) {
    staging_ = PinnedBuffer();
    TWICE_ASSIGN_OR_RETURN(staging_, PinnedBuffer::Allocate(wanted));
  }
  absl::Status status = Queue(after, copies);
  if (status.ok()) status = Drain();
  if (!status.ok()) {
    // Nothing may still write the staging memory when the next batch
    // starts.
    (void)copies_->Synchronize();
    staged_.clear();
    used_ = 0;
  }
  return status;
}

absl::Status HostDownloads::Queue(const Stream& after,
                                  absl::Span<const Copy> copies) {
  // The copies read what the work queued on `after` so far writes; the
  // copy stream waits for it on the device, the host does not.
  TWICE_CUDA_RETURN_IF_ERROR(cudaEventRecord(ready_, after.get()));
  TWICE_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copies_->get(), ready_, 0));
  for (const Copy& c : copies) {
    const char* from = static_cast<const char*>(c.device);
    char* to = static_cast<char*>(c.host);
    for (int64_t left = c.bytes; left > 0;) {
      const int64_t piece = std::min(left, staging_.bytes());
      if (used_ + piece > staging_.bytes()) TWICE_RETURN_IF_ERROR(Drain());
      TWICE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          staging_.data() + used_, from, static_cast<size_t>(piece),
          cudaMemcpyDeviceToHost, copies_->get()));
      staged_.push_back({to, used_, piece});
      used_ += PinnedAligned(piece);
      from += piece;
      to += piece;
      left -= piece;
    }
  }
  return absl::OkStatus();
}

absl::Status HostDownloads::Drain() {
  TWICE_RETURN_IF_ERROR(copies_->Synchronize());
  ++waits_;
  for (const Staged& s : staged_) {
    std::memcpy(s.host, staging_.data() + s.offset,
                static_cast<size_t>(s.bytes));
  }
  staged_.clear();
  used_ = 0;
  return absl::OkStatus();
}

}  // namespace twice::kernels::cuda
