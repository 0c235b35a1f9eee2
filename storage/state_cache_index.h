// StateCacheIndex: the in-memory view of a store's durable states that byte
// accounting, pins and eviction need, so none of them reads a blob or scans
// RocksDB on the request path.
//
// It mirrors two column families (rebuilt from them at open): state_index
// (size, recompute cost, form and tenant of each key) and refs (how many
// records, and how many pinned records, name each key). Only recency is kept
// here alone: a read bumps a logical clock in memory rather than writing to
// disk, and after a restart recency restarts from write times.
//
// Eviction score (Marconi's, applied to a disk tier), per candidate c:
//
//   efficiency(c) = recompute_tokens(c) * max(flops_per_token(c), 1)
//                   / bytes freed by evicting c
//   score(c)      = recency(c) / max over candidates of recency
//                   + cost_weight * efficiency(c) / max efficiency
//
// with recency the logical time since the oldest candidate's last use. The
// lowest score goes first: a state that saves many prefill FLOPs per byte
// outlives a cheap one of the same age. Candidates are whole states and
// manifests that no pinned record names; blocks are never candidates on
// their own and go with the last manifest naming them. A tenant's budget
// picks among that tenant's candidates only.
//
// Thread safety: every method may be called concurrently; one internal
// shared mutex guards the maps and Touch takes it shared, so readers never
// wait for each other or for a victim scan. Callers that need a read and a
// later change to agree (the store's puts, deletes, evictions and pin
// changes) serialize on their own per-key locks.
#ifndef TWICE_STORAGE_STATE_CACHE_INDEX_H_
#define TWICE_STORAGE_STATE_CACHE_INDEX_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "storage/state_key.h"
#include "storage/state_value.h"

namespace twice::storage {

using StateKeySet = std::unordered_set<StateKey, StateKeyHash>;

struct CachedState {
  int64_t stored_bytes = 0;
  int64_t recompute_tokens = 0;
  double flops_per_token = 0;
  StateForm form = StateForm::kWhole;
  std::vector<StateKey> blocks;  // manifests: their blocks, in order
  std::string tenant{};          // empty: counted against no tenant
};

struct CacheTotals {
  int64_t bytes = 0;   // every durable value: states, manifests, blocks
  int64_t states = 0;  // whole states and manifests
  int64_t blocks = 0;
  int64_t pinned_states = 0;  // stored states some pinned record names
};

struct EvictionVictim {
  StateKey key;
  int64_t freed_bytes = 0;  // expected; the store re-checks under its locks
  double score = 0;
};

class StateCacheIndex {
 public:
  // Adds or replaces `key`. A manifest's blocks must already be present;
  // their manifest counts go up (and those of a replaced manifest down).
  void Upsert(const StateKey& key, const CachedState& state);
  // Removes `key` and returns what it held (nullopt when absent). For a
  // manifest, the blocks no other manifest names are appended to
  // `orphaned_blocks` (still present; the caller deletes and Removes them).
  std::optional<CachedState> Remove(const StateKey& key,
                                    std::vector<StateKey>* orphaned_blocks);
  // Blocks that no manifest names once the manifests among `keys` are
  // removed.
  StateKeySet OrphansIfRemoved(const StateKeySet& keys) const;
  // Blocks that no manifest names now.
  std::vector<StateKey> OrphanBlocks() const;
  // Manifests naming block `key` (0 when absent).
  int ManifestRefs(const StateKey& key) const;

  std::optional<CachedState> Find(const StateKey& key) const;
  bool Contains(const StateKey& key) const;
  // Marks `key` as just used (no-op when absent).
  void Touch(const StateKey& key);

  // Records naming `key` changed by `records` of which `pinned` are pinned
  // (negative to remove). Keys need not be stored: a record may name a
  // state that was evicted or never written.
  void AddRefs(const StateKey& key, int records, int pinned);
  int RecordRefs(const StateKey& key) const;
  bool IsPinned(const StateKey& key) const;

  CacheTotals Totals() const;
  // Bytes of every durable value (states, manifests, blocks) of `tenant`; 0
  // for the empty tenant.
  int64_t TenantBytes(std::string_view tenant) const;
  // Every stored key of `form`.
  std::vector<StateKey> Keys(StateForm form) const;

  // Victims, lowest score first, whose freed bytes add up to at least
  // `bytes_to_free` (fewer when not enough is evictable). `exclude` is never
  // picked (the key being written). With `tenant`, only states of that
  // tenant are candidates, and scores are normalised among them.
  std::vector<EvictionVictim> PickVictims(
      int64_t bytes_to_free, double cost_weight, const StateKeySet& exclude,
      std::optional<std::string_view> tenant = std::nullopt) const;

 private:
  struct Entry {
    CachedState state;
    // Logical clock of the last use; written through std::atomic_ref while
    // the lock is held shared (Touch), hence mutable.
    mutable int64_t last_use = 0;
    int32_t manifest_refs = 0;  // blocks: manifests naming it
  };
  struct Refs {
    int32_t records = 0;
    int32_t pinned = 0;
  };

  int64_t Tick() { return clock_.fetch_add(1, std::memory_order_relaxed) + 1; }
  // Bytes freed by evicting `entry` (its exclusive blocks included).
  int64_t FreedBytesLocked(const Entry& entry) const;
  // Adds `bytes` to the total of `tenant` (none for the empty tenant).
  void AddTenantBytesLocked(const std::string& tenant, int64_t bytes);

  mutable std::shared_mutex mu_;
  std::unordered_map<StateKey, Entry, StateKeyHash> entries_;
  std::unordered_map<StateKey, Refs, StateKeyHash> refs_;
  CacheTotals totals_;
  std::unordered_map<std::string, int64_t> tenant_bytes_;  // non-zero only
  std::atomic<int64_t> clock_{0};
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_STATE_CACHE_INDEX_H_
