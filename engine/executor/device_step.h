// The device handles of a decode step (executor_device.h): the row ->
// slot map the slot-indexed operations read, the step's buffers that stay
// put between steps, and a recording of the step's queued work.
#ifndef TWICE_ENGINE_EXECUTOR_DEVICE_STEP_H_
#define TWICE_ENGINE_EXECUTOR_DEVICE_STEP_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace twice::engine {

// The row -> slot map of one batched step and each row's position (the
// tokens its sequence has read before this one), resident on the device
// for the step's slot-indexed operations (uploaded once per step). The
// base holds the host copies every device keeps (what the checks read);
// a device adds where its own copy lives.
class DeviceSlotMap {
 public:
  virtual ~DeviceSlotMap() = default;
  DeviceSlotMap(const DeviceSlotMap&) = delete;
  DeviceSlotMap& operator=(const DeviceSlotMap&) = delete;
  absl::Span<const int32_t> slots() const { return slots_; }  // host copy
  absl::Span<const int64_t> positions() const { return positions_; }

 protected:
  // Only a device's own map (which knows where its copy lives) is made or
  // refilled.
  DeviceSlotMap(absl::Span<const int32_t> slots,
                absl::Span<const int64_t> positions)
      : slots_(slots.begin(), slots.end()),
        positions_(positions.begin(), positions.end()) {}
  // New host copies of what the device's copy now holds.
  void Refill(absl::Span<const int32_t> slots,
              absl::Span<const int64_t> positions) {
    slots_.assign(slots.begin(), slots.end());
    positions_.assign(positions.begin(), positions.end());
  }

 private:
  std::vector<int32_t> slots_;
  std::vector<int64_t> positions_;
};

// The inputs and outputs of one decode step of `rows` sequences on the
// device, in buffers that stay where they are: the row -> slot map with
// positions (what the slot-indexed operations read), each row's token id
// and sampling rule, and room for the sampled ids. The executor keeps one
// per batch size and refills it every step, so that a step recorded once
// as a graph (Capture) replays on the next step's inputs.
class DeviceStep {
 public:
  virtual ~DeviceStep() = default;
  virtual int64_t rows() const = 0;
  virtual const DeviceSlotMap& slot_map() const = 0;
  virtual absl::Span<const int32_t> token_ids() const = 0;  // host copy
};

// A device's recording of queued work (CUDA: a graph instantiated from a
// stream capture), replayed by Launch on whatever its buffers hold then.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_EXECUTOR_DEVICE_STEP_H_
