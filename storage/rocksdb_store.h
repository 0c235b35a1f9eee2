// Opening and restoring the RocksDB store (rocksdb_state_store.h is the
// implementation; storage/FORMAT.md the bytes on disk).
#ifndef TWICE_STORAGE_ROCKSDB_STORE_H_
#define TWICE_STORAGE_ROCKSDB_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "storage/store.h"

namespace twice::storage {

struct RocksDbStoreOptions {
  // Directory of the database; created when missing. Required.
  std::string path;
  // Sync the WAL on every write so an acknowledged write survives a power
  // loss. Default: true.
  bool sync_writes = true;
  // Bytes durable state values may occupy (StoreStats::state_bytes); a put
  // that would exceed it evicts first. States that pinned records name are
  // never evicted and may hold the store above the budget on their own.
  // 0 means unbounded. Default: 0.
  int64_t state_budget_bytes = 0;
  // Bytes the durable state values of one tenant (PutStateOptions::tenant)
  // may occupy. A put that would take its tenant above it first evicts that
  // tenant's own lowest-scoring unpinned states, never another tenant's,
  // and fails with RESOURCE_EXHAUSTED, evicting nothing, when they cannot
  // make room (the tenant's pinned states fill it, or the value alone is
  // larger). States of no tenant are outside it. While the tenants' budgets
  // add up to at most state_budget_bytes (and every state has a tenant), no
  // tenant's put evicts another tenant's states. 0 means unbounded.
  // Default: 0.
  int64_t tenant_state_budget_bytes = 0;
  // Weight of recompute cost per byte against recency in the eviction score
  // (Marconi's alpha); 0 makes eviction least-recently-used. Default: 1.
  double eviction_cost_weight = 1.0;
  // Memory for recently written and read state values (RocksDB's blob
  // cache, filled at flush): a hit is served without a file read or copy
  // inside RocksDB. 0 disables it. Default: 256 MiB.
  int64_t state_cache_bytes = int64_t{256} << 20;
  // Free bytes the store's file system must keep beyond a write: below it
  // puts fail with RESOURCE_EXHAUSTED (deletes still work) instead of
  // running RocksDB into ENOSPC (storage/disk_space_guard.h). Leave room for
  // memtable flushes and compactions. Default: 64 MiB.
  int64_t min_free_disk_bytes = int64_t{64} << 20;
  // Bytes of write-ahead log kept before the column families it holds are
  // flushed (RocksDB's max_total_wal_size; it also caps the log's
  // preallocation). Every state value passes through the log, and
  // RocksDB's own default (4x all write buffers, ~1.8 GiB here) let the log
  // alone fill a small volume (docs/RELIABILITY.md). Default: 64 MiB.
  int64_t max_wal_bytes = int64_t{64} << 20;
};

// Opens (or creates) the RocksDB-backed store. Exactly one process may own a
// directory: a second open fails with UNAVAILABLE.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Store>> OpenRocksDbStore(
    const RocksDbStoreOptions& options);

// Restores a backup offline: copies the checkpoint in `backup_dir` (made by
// StoreAdmin::Backup) into options.path, which must be missing or empty,
// then opens the restored store and verifies every value. No server may own
// options.path meanwhile. FAILED_PRECONDITION when options.path holds
// files; the verify report otherwise (its `bad` list empty when the backup
// is intact).
[[nodiscard]] absl::StatusOr<VerifyReport> RestoreRocksDbStore(
    const std::string& backup_dir, const RocksDbStoreOptions& options);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_ROCKSDB_STORE_H_
