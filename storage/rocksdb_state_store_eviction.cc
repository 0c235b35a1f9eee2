// The byte budgets of RocksDbStateStore: puts make room by evicting the
// lowest-scoring unpinned states (state_cache_index.h has the score), first
// among their own tenant's for its budget, then among all for the store's.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "storage/absl_view.h"
#include "storage/rocksdb_state_store.h"

namespace twice::storage {
namespace {

// Rounds of victim picking per put. Each round frees what the previous one
// found short (a victim pinned or deleted meanwhile); more than a few means
// only pinned states are left.
constexpr int kMaxEvictionRounds = 4;

}  // namespace

RocksDbStateStore::KeySet RocksDbStateStore::VictimKeys(
    const std::vector<EvictionVictim>& victims) {
  KeySet keys;
  for (const EvictionVictim& victim : victims) keys.insert(victim.key);
  return keys;
}

int64_t RocksDbStateStore::FreedBytes(const KeySet& keys) const {
  KeySet all = keys;
  for (const StateKey& block : OrphansIfRemoved(keys)) all.insert(block);
  int64_t bytes = 0;
  for (const StateKey& key : all) {
    std::optional<CachedState> state = index_.Find(key);
    if (state.has_value()) bytes += state->stored_bytes;
  }
  return bytes;
}

absl::Status RocksDbStateStore::Evict(const KeySet& keys) {
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
  return absl::OkStatus();
}

int64_t RocksDbStateStore::TenantReserved(std::string_view tenant) {
  std::lock_guard<std::mutex> lock(tenant_reserved_mu_);
  auto it = tenant_reserved_.find(std::string(tenant));
  return it == tenant_reserved_.end() ? 0 : it->second;
}

int64_t RocksDbStateStore::TenantStateBytes(std::string_view tenant) const {
  return index_.TenantBytes(tenant);
}

absl::Status RocksDbStateStore::MakeTenantRoomLocked(int64_t incoming,
                                                     const KeySet& exclude,
                                                     std::string_view tenant) {
  const int64_t budget = options_.tenant_state_budget_bytes;
  for (int round = 0;; ++round) {
    // Reservations first: a put that commits meanwhile moves its bytes from
    // reserved to stored (stored first), so it is counted once or twice,
    // never missed.
    const int64_t reserved = TenantReserved(tenant);
    const int64_t used = index_.TenantBytes(tenant) + reserved;
    const int64_t over = used + incoming - budget;
    if (over <= 0) return absl::OkStatus();
    // Evict only when that makes the put fit: a put that must fail keeps
    // the tenant's states. Victims' own estimates leave out blocks that
    // two of them share, so what they free together is counted.
    KeySet victims;
    int64_t freeable = 0;
    if (round < kMaxEvictionRounds && incoming <= budget) {
      victims = VictimKeys(index_.PickVictims(
          over + budget / 32, options_.eviction_cost_weight, exclude, tenant));
      freeable = FreedBytes(victims);
    }
    if (freeable < over) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "tenant \"", AbslView(tenant), "\" holds ", used,
          " bytes of stored states and its budget is ", budget,
          " bytes (--tenant_state_budget_bytes): ", incoming,
          " more do not fit, and only ", freeable,
          " bytes of its states are evictable (pinned states never are)"));
    }
    if (absl::Status s = Evict(victims); !s.ok()) return s;
  }
}

absl::Status RocksDbStateStore::MakeRoom(int64_t incoming,
                                         const KeySet& exclude,
                                         std::string_view tenant) {
  const int64_t budget = options_.state_budget_bytes;
  const bool tenant_bounded = TenantBounded(tenant);
  if (budget <= 0 && !tenant_bounded) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(evict_mu_);
  if (tenant_bounded) {
    if (absl::Status s = MakeTenantRoomLocked(incoming, exclude, tenant);
        !s.ok()) {
      return s;
    }
  }
  for (int round = 0; budget > 0 && round < kMaxEvictionRounds; ++round) {
    const int64_t reserved = reserved_bytes_.load();  // first, as above
    const int64_t used = index_.Totals().bytes + reserved;
    const int64_t over = used + incoming - budget;
    if (over <= 0) break;
    // Free a little more than needed so the victim scan, which is linear in
    // the states stored, is paid once every few puts rather than on each.
    const int64_t slack = budget / 32;
    std::vector<EvictionVictim> victims = index_.PickVictims(
        over + slack, options_.eviction_cost_weight, exclude);
    if (victims.empty()) break;  // only pinned or excluded states are left
    if (absl::Status s = Evict(VictimKeys(victims)); !s.ok()) return s;
  }
  // Reserved while evict_mu_ is held, so two puts cannot both count the
  // same free bytes.
  if (budget > 0) reserved_bytes_ += incoming;
  if (tenant_bounded) {
    std::lock_guard<std::mutex> reserved(tenant_reserved_mu_);
    tenant_reserved_[std::string(tenant)] += incoming;
  }
  return absl::OkStatus();
}

void RocksDbStateStore::Unreserve(int64_t incoming, std::string_view tenant) {
  if (options_.state_budget_bytes > 0) reserved_bytes_ -= incoming;
  if (!TenantBounded(tenant)) return;
  std::lock_guard<std::mutex> lock(tenant_reserved_mu_);
  auto it = tenant_reserved_.find(std::string(tenant));
  if (it == tenant_reserved_.end()) return;
  it->second -= incoming;
  if (it->second <= 0) tenant_reserved_.erase(it);
}

}  // namespace twice::storage
