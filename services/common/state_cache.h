// StateCache: decoded durable states kept in memory by key, so concurrent
// questions on one document (a BatchAsk, or a popular document) share one
// load: the state is read from the store, verified and decoded once, and
// each user gets its own copy to advance.
//
// Durable states are content addressed (the key hashes the whole token
// chain), so a cached copy can never be stale; evicting or deleting the
// stored copy only means the next miss reloads (or the caller recomputes).
// Ephemeral states are consumed once and never cached.
//
// Single flight: while one caller loads a key, others asking for the same
// key wait for that load instead of reading the store again.
// Bounded: least recently used states are dropped beyond the capacity.
// Thread-safe.
#ifndef TWICE_SERVICES_COMMON_STATE_CACHE_H_
#define TWICE_SERVICES_COMMON_STATE_CACHE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/models/model.h"
#include "engine/state/sequence_state.h"
#include "storage/state_key.h"
#include "storage/state_store.h"

namespace twice::services {

class StateCache {
 public:
  // `capacity_bytes` bounds the decoded states kept (SequenceState::
  // ByteSize); 0 disables caching but keeps single flight.
  explicit StateCache(int64_t capacity_bytes) : capacity_(capacity_bytes) {}

  // A copy of the durable state `key` of `model` that the caller owns.
  // Errors as LoadState (services/common/state_io.h): a missing or corrupt
  // state is NOT_FOUND.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<engine::SequenceState>> Load(
      storage::StateStore& store, const engine::Model& model,
      const storage::StateKey& key);

  int64_t hits() const;
  int64_t misses() const;

 private:
  struct Entry {
    std::shared_ptr<const engine::SequenceState> state;
    int64_t bytes = 0;
    std::list<storage::StateKey>::iterator lru;
  };

  void Insert(const storage::StateKey& key,
              std::shared_ptr<const engine::SequenceState> state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t capacity_;
  mutable absl::Mutex mu_;
  absl::CondVar loaded_;  // signalled when a load ends
  std::unordered_map<storage::StateKey, Entry, storage::StateKeyHash> entries_
      ABSL_GUARDED_BY(mu_);
  std::list<storage::StateKey> lru_ ABSL_GUARDED_BY(mu_);  // front = newest
  std::unordered_set<storage::StateKey, storage::StateKeyHash> loading_
      ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_STATE_CACHE_H_
