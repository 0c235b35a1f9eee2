#include "storage/state_cache_index.h"

#include <algorithm>
#include <limits>
#include <mutex>

namespace twice::storage {

void StateCacheIndex::Upsert(const StateKey& key, const CachedState& state) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto [it, inserted] = entries_.try_emplace(key);
  Entry& entry = it->second;
  const bool pinned = refs_.contains(key) && refs_.at(key).pinned > 0;
  if (!inserted) {
    totals_.bytes -= entry.state.stored_bytes;
    AddTenantBytesLocked(entry.state.tenant, -entry.state.stored_bytes);
    for (const StateKey& block : entry.state.blocks) {
      auto b = entries_.find(block);
      if (b != entries_.end()) b->second.manifest_refs -= 1;
    }
  } else if (state.form == StateForm::kBlock) {
    totals_.blocks += 1;
  } else {
    totals_.states += 1;
    if (pinned) totals_.pinned_states += 1;
  }
  for (const StateKey& block : state.blocks) {
    auto b = entries_.find(block);
    if (b != entries_.end()) b->second.manifest_refs += 1;
  }
  entry.state = state;
  entry.last_use = Tick();
  totals_.bytes += state.stored_bytes;
  AddTenantBytesLocked(state.tenant, state.stored_bytes);
}

std::optional<CachedState> StateCacheIndex::Remove(
    const StateKey& key, std::vector<StateKey>* orphaned_blocks) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  CachedState removed = std::move(it->second.state);
  entries_.erase(it);
  totals_.bytes -= removed.stored_bytes;
  AddTenantBytesLocked(removed.tenant, -removed.stored_bytes);
  if (removed.form == StateForm::kBlock) {
    totals_.blocks -= 1;
  } else {
    totals_.states -= 1;
    auto r = refs_.find(key);
    if (r != refs_.end() && r->second.pinned > 0) totals_.pinned_states -= 1;
  }
  for (const StateKey& block : removed.blocks) {
    auto b = entries_.find(block);
    if (b == entries_.end()) continue;
    b->second.manifest_refs -= 1;
    if (b->second.manifest_refs <= 0 && orphaned_blocks != nullptr) {
      orphaned_blocks->push_back(block);
    }
  }
  return removed;
}

StateKeySet StateCacheIndex::OrphansIfRemoved(const StateKeySet& keys) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::unordered_map<StateKey, int32_t, StateKeyHash> dropped;
  for (const StateKey& key : keys) {
    auto it = entries_.find(key);
    if (it == entries_.end()) continue;
    for (const StateKey& block : it->second.state.blocks) dropped[block] += 1;
  }
  StateKeySet orphans;
  for (const auto& [block, count] : dropped) {
    auto b = entries_.find(block);
    if (b != entries_.end() && !keys.contains(block) &&
        b->second.manifest_refs <= count) {
      orphans.insert(block);
    }
  }
  return orphans;
}

std::vector<StateKey> StateCacheIndex::OrphanBlocks() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::vector<StateKey> orphans;
  for (const auto& [key, entry] : entries_) {
    if (entry.state.form == StateForm::kBlock && entry.manifest_refs <= 0) {
      orphans.push_back(key);
    }
  }
  return orphans;
}

int StateCacheIndex::ManifestRefs(const StateKey& key) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? 0 : it->second.manifest_refs;
}

std::optional<CachedState> StateCacheIndex::Find(const StateKey& key) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second.state;
}

bool StateCacheIndex::Contains(const StateKey& key) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return entries_.contains(key);
}

void StateCacheIndex::Touch(const StateKey& key) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  // Readers hold the lock shared, so the field is written concurrently.
  std::atomic_ref<int64_t>(it->second.last_use)
      .store(Tick(), std::memory_order_relaxed);
}

void StateCacheIndex::AddRefs(const StateKey& key, int records, int pinned) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  Refs& refs = refs_[key];
  const bool was_pinned = refs.pinned > 0;
  refs.records += records;
  refs.pinned += pinned;
  const bool is_pinned = refs.pinned > 0;
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.state.form != StateForm::kBlock &&
      was_pinned != is_pinned) {
    totals_.pinned_states += is_pinned ? 1 : -1;
  }
  if (refs.records <= 0 && refs.pinned <= 0) refs_.erase(key);
}

int StateCacheIndex::RecordRefs(const StateKey& key) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = refs_.find(key);
  return it == refs_.end() ? 0 : it->second.records;
}

bool StateCacheIndex::IsPinned(const StateKey& key) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = refs_.find(key);
  return it != refs_.end() && it->second.pinned > 0;
}

CacheTotals StateCacheIndex::Totals() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return totals_;
}

int64_t StateCacheIndex::TenantBytes(std::string_view tenant) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = tenant_bytes_.find(std::string(tenant));
  return it == tenant_bytes_.end() ? 0 : it->second;
}

void StateCacheIndex::AddTenantBytesLocked(const std::string& tenant,
                                           int64_t bytes) {
  if (tenant.empty() || bytes == 0) return;
  auto it = tenant_bytes_.try_emplace(tenant, 0).first;
  it->second += bytes;
  if (it->second == 0) tenant_bytes_.erase(it);
}

std::vector<StateKey> StateCacheIndex::Keys(StateForm form) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::vector<StateKey> keys;
  for (const auto& [key, entry] : entries_) {
    if (entry.state.form == form) keys.push_back(key);
  }
  return keys;
}

int64_t StateCacheIndex::FreedBytesLocked(const Entry& entry) const {
  int64_t bytes = entry.state.stored_bytes;
  for (const StateKey& block : entry.state.blocks) {
    auto b = entries_.find(block);
    if (b != entries_.end() && b->second.manifest_refs <= 1) {
      bytes += b->second.state.stored_bytes;
    }
  }
  return bytes;
}

std::vector<EvictionVictim> StateCacheIndex::PickVictims(
    int64_t bytes_to_free, double cost_weight, const StateKeySet& exclude,
    std::optional<std::string_view> tenant) const {
  std::vector<EvictionVictim> victims;
  if (bytes_to_free <= 0) return victims;
  struct Raw {
    StateKey key;
    int64_t freed;
    int64_t last_use;
    double efficiency;
  };
  std::vector<Raw> raw;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    raw.reserve(entries_.size());
    for (const auto& [key, entry] : entries_) {
      if (entry.state.form == StateForm::kBlock || exclude.contains(key) ||
          (tenant.has_value() && entry.state.tenant != *tenant)) {
        continue;
      }
      auto r = refs_.find(key);
      if (r != refs_.end() && r->second.pinned > 0) continue;
      const int64_t freed = FreedBytesLocked(entry);
      const double cost = static_cast<double>(entry.state.recompute_tokens) *
                          std::max(entry.state.flops_per_token, 1.0);
      raw.push_back({key, freed,
                     std::atomic_ref<int64_t>(entry.last_use)
                         .load(std::memory_order_relaxed),
                     cost / static_cast<double>(std::max<int64_t>(freed, 1))});
    }
  }
  if (raw.empty()) return victims;

  int64_t oldest = std::numeric_limits<int64_t>::max();
  int64_t newest = std::numeric_limits<int64_t>::min();
  double best = 0;
  for (const Raw& r : raw) {
    oldest = std::min(oldest, r.last_use);
    newest = std::max(newest, r.last_use);
    best = std::max(best, r.efficiency);
  }
  const double span =
      static_cast<double>(std::max<int64_t>(newest - oldest, 1));
  victims.reserve(raw.size());
  for (const Raw& r : raw) {
    const double recency = static_cast<double>(r.last_use - oldest) / span;
    const double efficiency = best > 0 ? r.efficiency / best : 0;
    victims.push_back({r.key, r.freed, recency + cost_weight * efficiency});
  }
  std::sort(victims.begin(), victims.end(),
            [](const EvictionVictim& a, const EvictionVictim& b) {
              return a.score < b.score;
            });
  int64_t freed = 0;
  size_t keep = 0;
  while (keep < victims.size() && freed < bytes_to_free) {
    freed += victims[keep].freed_bytes;
    ++keep;
  }
  victims.resize(keep);
  return victims;
}

}  // namespace twice::storage
