#include "storage/ephemeral_ttl.h"

#include <chrono>
#include <utility>

#include "absl/status/statusor.h"
#include "storage/state_value.h"

namespace twice::storage {

int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

EphemeralTtlFilter::EphemeralTtlFilter(int64_t ttl_ms,
                                       std::function<int64_t()> now_unix_ms,
                                       std::atomic<int64_t>* corruptions)
    : ttl_ms_(ttl_ms),
      now_unix_ms_(std::move(now_unix_ms)),
      corruptions_(corruptions) {}

bool EphemeralTtlFilter::Filter(int /*level*/, const rocksdb::Slice& /*key*/,
                                const rocksdb::Slice& existing_value,
                                std::string* /*new_value*/,
                                bool* /*value_changed*/) const {
  absl::StatusOr<StateValue> value =
      DecodeStateValue({existing_value.data(), existing_value.size()});
  if (!value.ok()) {
    if (corruptions_ != nullptr) {
      corruptions_->fetch_add(1, std::memory_order_relaxed);
    }
    return true;
  }
  return IsExpired(value->written_unix_ms, now_unix_ms_(), ttl_ms_);
}

}  // namespace twice::storage
