#include "services/common/state_cache.h"

#include <utility>

#include "services/common/state_io.h"

namespace twice::services {

absl::StatusOr<std::unique_ptr<engine::SequenceState>> StateCache::Load(
    storage::StateStore& store, const engine::Model& model,
    const storage::StateKey& key) {
  {
    absl::MutexLock lock(&mu_);
    // Wait out another caller's load of the same key: it is about to
    // become a hit (or fail, and then this caller tries itself).
    while (loading_.contains(key)) loaded_.Wait(&mu_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.state->Clone();
    }
    ++misses_;
    loading_.insert(key);
  }
  absl::StatusOr<std::unique_ptr<engine::SequenceState>> loaded =
      LoadState(store, model, key);
  absl::MutexLock lock(&mu_);
  loading_.erase(key);
  loaded_.SignalAll();
  if (!loaded.ok()) return loaded.status();
  Insert(key, std::shared_ptr<const engine::SequenceState>((*loaded)->Clone()));
  return loaded;
}

void StateCache::Insert(const storage::StateKey& key,
                        std::shared_ptr<const engine::SequenceState> state) {
  const int64_t bytes = state->ByteSize();
  if (bytes > capacity_ || entries_.contains(key)) return;
  while (bytes_ + bytes > capacity_ && !lru_.empty()) {
    auto victim = entries_.find(lru_.back());
    bytes_ -= victim->second.bytes;
    entries_.erase(victim);
    lru_.pop_back();
  }
  lru_.push_front(key);
  entries_.emplace(key, Entry{std::move(state), bytes, lru_.begin()});
  bytes_ += bytes;
}

int64_t StateCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

int64_t StateCache::misses() const {
  absl::MutexLock lock(&mu_);
  return misses_;
}

}  // namespace twice::services
