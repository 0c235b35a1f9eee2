// DevicePassSegments: a prefill pass's sequences as an ExecutorDevice
// holds them for the operations that run every sequence of the pass in
// one call (executor_device.h, the *Segments operations).
#ifndef TWICE_ENGINE_EXECUTOR_DEVICE_PASS_SEGMENTS_H_
#define TWICE_ENGINE_EXECUTOR_DEVICE_PASS_SEGMENTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "kernels/pass_segments.h"

namespace twice::engine {

// A prefill pass's sequences (kernels/pass_segments.h) on the device,
// uploaded once per pass for the *Segments operations of all its layers.
// The base holds the host copy (what the checks read and what a device
// without a form of its own loops over).
class DevicePassSegments {
 public:
  virtual ~DevicePassSegments() = default;
  DevicePassSegments(const DevicePassSegments&) = delete;
  DevicePassSegments& operator=(const DevicePassSegments&) = delete;
  absl::Span<const kernels::PassSegment> segments() const { return segments_; }
  int64_t rows() const { return rows_; }  // the pass's

  // The host copy alone (ExecutorDevice::UploadPassSegments's default).
  static std::unique_ptr<DevicePassSegments> HostOnly(
      absl::Span<const kernels::PassSegment> segments, int64_t rows) {
    return std::unique_ptr<DevicePassSegments>(
        new DevicePassSegments(segments, rows));
  }

 protected:
  DevicePassSegments(absl::Span<const kernels::PassSegment> segments,
                     int64_t rows)
      : segments_(segments.begin(), segments.end()), rows_(rows) {}

 private:
  std::vector<kernels::PassSegment> segments_;
  int64_t rows_ = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_EXECUTOR_DEVICE_PASS_SEGMENTS_H_
