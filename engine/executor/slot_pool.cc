#include "engine/executor/slot_pool.h"

#include "absl/strings/str_cat.h"
#include "engine/executor/no_room.h"

namespace twice::engine {

std::string SlotIdName(SlotId id) {
  return absl::StrCat("slot ", id.index, " (generation ", id.generation, ")");
}

SlotPool::SlotPool(int32_t capacity)
    : slots_(static_cast<size_t>(capacity < 0 ? 0 : capacity)) {}

absl::StatusOr<SlotId> SlotPool::Acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.live) continue;
    s.live = true;
    ++s.generation;
    ++in_use_;
    return SlotId{static_cast<int32_t>(i), s.generation};
  }
  return NoRoomError(
      absl::StrCat("all ", slots_.size(),
                   " state slots are in use; finish or release a sequence, "
                   "or give the executor more slots"));
}

absl::Status SlotPool::Release(SlotId id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckLocked(id); !s.ok()) return s;
  slots_[id.index].live = false;
  --in_use_;
  return absl::OkStatus();
}

absl::Status SlotPool::Check(SlotId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CheckLocked(id);
}

absl::Status SlotPool::CheckLocked(SlotId id) const {
  if (id.index < 0 || id.index >= static_cast<int32_t>(slots_.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat(SlotIdName(id), " is not a slot of this executor (",
                     slots_.size(), " slots)"));
  }
  const Slot& s = slots_[id.index];
  if (!s.live || s.generation != id.generation) {
    return absl::FailedPreconditionError(absl::StrCat(
        SlotIdName(id), " was released; its sequence is gone from the device"));
  }
  return absl::OkStatus();
}

int32_t SlotPool::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

}  // namespace twice::engine
