// The byte budget of RocksDbStateStore: puts make room by evicting the
// lowest-scoring unpinned states (state_cache_index.h has the score).
#include <algorithm>

#include "storage/rocksdb_state_store.h"

namespace twice::storage {
namespace {

// Rounds of victim picking per put. Each round frees what the previous one
// found short (a victim pinned or deleted meanwhile); more than a few means
// only pinned states are left.
constexpr int kMaxEvictionRounds = 4;

}  // namespace

absl::Status RocksDbStateStore::MakeRoom(int64_t incoming,
                                         const KeySet& exclude) {
  const int64_t budget = options_.state_budget_bytes;
  if (budget <= 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(evict_mu_);
  for (int round = 0; round < kMaxEvictionRounds; ++round) {
    const int64_t used = index_.Totals().bytes + reserved_bytes_.load();
    const int64_t over = used + incoming - budget;
    if (over <= 0) break;
    // Free a little more than needed so the victim scan, which is linear in
    // the states stored, is paid once every few puts rather than on each.
    const int64_t slack = budget / 32;
    std::vector<EvictionVictim> victims = index_.PickVictims(
        over + slack, options_.eviction_cost_weight, exclude);
    if (victims.empty()) break;  // only pinned or excluded states are left
    KeySet keys;
    for (const EvictionVictim& victim : victims) keys.insert(victim.key);
    // A record may have pinned a victim since it was picked; pins change
    // only under the key's stripe, which DeleteDurable holds while asking.
    absl::StatusOr<Deleted> deleted = DeleteDurable(
        keys,
        [this](const StateKey& key) {
          return index_.IsPinned(key) || !index_.Contains(key);
        },
        unsynced_write_options_);
    if (!deleted.ok()) return deleted.status();
    evictions_ += deleted->states;
    evicted_bytes_ += deleted->bytes;
  }
  // Reserved while evict_mu_ is held, so two puts cannot both count the
  // same free bytes.
  reserved_bytes_ += incoming;
  return absl::OkStatus();
}

void RocksDbStateStore::Unreserve(int64_t incoming) {
  if (options_.state_budget_bytes > 0) reserved_bytes_ -= incoming;
}

}  // namespace twice::storage
