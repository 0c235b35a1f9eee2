// SlotPool: which of an executor's fixed state slots hold a live sequence.
//
// A resident executor keeps every sequence's layer states in one of
// `capacity` slots of device memory (state arrays [capacity, ...] per
// layer), so a decode step for any set of sequences indexes the same
// arrays. A SlotId names a slot and the generation it was handed out in:
// after Release the slot may be reused, and the old id is refused
// (FAILED_PRECONDITION) instead of reading another sequence's state.
// Thread-safe.
#ifndef TWICE_ENGINE_EXECUTOR_SLOT_POOL_H_
#define TWICE_ENGINE_EXECUTOR_SLOT_POOL_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace twice::engine {

struct SlotId {
  int32_t index = -1;
  uint32_t generation = 0;

  bool operator==(const SlotId&) const = default;
};

// "slot 3 (generation 7)".
std::string SlotIdName(SlotId id);

class SlotPool {
 public:
  explicit SlotPool(int32_t capacity);

  // The lowest free slot; RESOURCE_EXHAUSTED "all N state slots are in
  // use" when none is free.
  [[nodiscard]] absl::StatusOr<SlotId> Acquire();
  // FAILED_PRECONDITION unless `id` is live (Check); the slot is then free.
  [[nodiscard]] absl::Status Release(SlotId id);
  // OK when `id` was handed out by this pool and not released since.
  [[nodiscard]] absl::Status Check(SlotId id) const;

  int32_t capacity() const { return static_cast<int32_t>(slots_.size()); }
  int32_t in_use() const;

 private:
  struct Slot {
    bool live = false;
    uint32_t generation = 0;  // of the current or last lease
  };
  [[nodiscard]] absl::Status CheckLocked(SlotId id) const;

  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  int32_t in_use_ = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_EXECUTOR_SLOT_POOL_H_
