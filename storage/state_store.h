// StateStore: durable, verified storage of state blobs and document records.
//
// Contract:
// - Keys and bytes only: a state blob is opaque here. Every value is wrapped
//   in an envelope (magic, format version, kind, length, checksum) that is
//   verified on every read. A value that fails verification is deleted,
//   counted as a corruption and reported as NOT_FOUND (a miss), so the caller
//   recomputes it; it is never returned.
// - PutDocument commits the record, its tokens and its references to the
//   states it names in one atomic write; the caller stores (durably) the
//   states a record names before the record. Tokens are the truth and live
//   as long as their record; states are a cache: any state may later be
//   evicted or found corrupt, and is then recomputed from the tokens.
// - Bounded: with a byte budget, puts evict durable states, lowest score
//   (recompute cost per byte and recency, state_cache_index.h) first; states
//   that a pinned record names are never evicted. Readers never wait for an
//   eviction. With a per-tenant budget, a tenant's put evicts only that
//   tenant's states to stay within it, and fails when they cannot make room.
// - Chunked states (chunk-KV) are append-only blocks (block_manifest.h):
//   PutStateBlocks writes only the blocks a base state lacks; GetState of a
//   chunked state returns its blocks assembled.
// - Thread safety: every method may be called concurrently.
// - Errors: NOT_FOUND (missing), INVALID_ARGUMENT (bad request),
//   DATA_LOSS (a stored document record or token blob is corrupt),
//   RESOURCE_EXHAUSTED (the disk is nearly full, or a put does not fit its
//   tenant's budget), UNAVAILABLE (I/O that may succeed on retry), INTERNAL
//   otherwise.
#ifndef TWICE_STORAGE_STATE_STORE_H_
#define TWICE_STORAGE_STATE_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "storage/document_record.h"
#include "storage/state_key.h"

namespace twice::storage {

struct PutStateOptions {
  // Prefill tokens the state saves; eviction weighs it. Default: 0.
  int64_t recompute_tokens = 0;
  // Prefill FLOPs per token of the model that made the state, when the
  // caller knows it: scales the recompute cost so states of different models
  // compare fairly. The store does not otherwise interpret it. Default: 0
  // (cost counted in tokens).
  double flops_per_token = 0;
  // The tenant the state belongs to (the tenant of its chain root,
  // state_key.h): its bytes count against that tenant's budget
  // (RocksDbStoreOptions::tenant_state_budget_bytes). Empty: no tenant, and
  // outside every tenant's budget. Default: empty.
  std::string tenant{};
};

struct DocumentPage {
  std::vector<DocumentRecord> records;
  std::string next_page_token;  // empty when there are no more
};

struct StoreStats {
  // Durable state values (whole states, manifests and blocks, with their
  // envelopes): what the budget bounds.
  int64_t state_bytes = 0;
  int64_t state_count = 0;  // whole states and chunked-state manifests
  int64_t document_count = 0;
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t evictions = 0;
  // Values the store can do without found corrupt and deleted: states with
  // their index entries (recomputed) and refs (rebuilt from records).
  int64_t corruptions = 0;
  int64_t recomputes = 0;
  int64_t budget_bytes = 0;  // 0: unbounded
  int64_t evicted_bytes = 0;
  int64_t block_count = 0;
  int64_t pinned_state_count = 0;  // stored states a pinned record names
  int64_t disk_bytes = 0;          // live SST and blob files (WAL not included)
  // Times corruption was met in the truth: a document record or token blob
  // (a bad envelope or a damaged file block), or a file of any family but
  // states failing a compaction. Nothing deletes or recomputes
  // these, so each read, scan or compaction that meets the damage counts.
  int64_t catalog_corruptions = 0;
};

// One stored value that failed verification.
struct BadValue {
  std::string family;  // column family
  std::string key;     // hex for state keys, "tenant/document_id" for records
  std::string reason;
};

struct VerifyOptions {
  // Delete bad states (counted as corruptions, as a read would) and rebuild
  // bad references. Bad records and token blobs are only reported: tokens
  // are the truth and cannot be recomputed. Default: false.
  bool repair = false;
};

struct VerifyReport {
  int64_t states_checked = 0;  // whole states, manifests and blocks
  int64_t documents_checked = 0;
  int64_t refs_checked = 0;
  int64_t bytes_checked = 0;
  std::vector<BadValue> bad;
  int64_t repaired = 0;
};

struct CompactReport {
  int64_t disk_bytes_before = 0;
  int64_t disk_bytes_after = 0;
};

struct GcReport {
  int64_t orphan_refs = 0;    // references to records that do not exist
  int64_t orphan_blocks = 0;  // blocks no manifest names
  int64_t disk_bytes_before = 0;
  int64_t disk_bytes_after = 0;
};

// A consistent copy of the whole store (a RocksDB checkpoint).
struct BackupReport {
  std::string path;  // directory of the checkpoint
  int64_t files = 0;
  int64_t bytes = 0;  // total size of the checkpoint's files
  int64_t document_count = 0;
  int64_t state_count = 0;
};

class StateStore {
 public:
  virtual ~StateStore() = default;

  [[nodiscard]] virtual absl::Status PutState(
      const StateKey& key, std::string_view blob,
      const PutStateOptions& options) = 0;
  [[nodiscard]] virtual absl::StatusOr<std::string> GetState(
      const StateKey& key) = 0;
  // Whether the state is stored (not verified; GetState verifies).
  [[nodiscard]] virtual absl::StatusOr<bool> HasState(const StateKey& key) = 0;
  [[nodiscard]] virtual absl::Status DeleteState(const StateKey& key) = 0;
  // Deletes a state that GetState returned but its consumer found corrupt
  // (the engine's codec rejected it): counted as a corruption, and the read
  // that returned it as a miss rather than a hit.
  [[nodiscard]] virtual absl::Status DiscardCorruptState(
      const StateKey& key) = 0;

  // Stores the chunked state `key` as the blocks of `base` (a chunked state,
  // when given) followed by `new_blocks`, writing only the new blocks and a
  // manifest, in one atomic write. NOT_FOUND when `base` is
  // not stored whole (missing, evicted or corrupt): write every block then.
  [[nodiscard]] virtual absl::Status PutStateBlocks(
      const StateKey& key, const std::optional<StateKey>& base,
      absl::Span<const std::string_view> new_blocks,
      const PutStateOptions& options) = 0;
  // The verified blocks of `key`, in order (a whole state is one block).
  // A missing or corrupt block makes the state a miss (NOT_FOUND).
  [[nodiscard]] virtual absl::StatusOr<std::vector<std::string>> GetStateBlocks(
      const StateKey& key) = 0;

  // Creates or replaces the record and its tokens atomically.
  [[nodiscard]] virtual absl::Status PutDocument(
      const DocumentRecord& record, absl::Span<const int32_t> tokens) = 0;
  // Replaces only the record (pin, access time); tokens must exist.
  [[nodiscard]] virtual absl::Status UpdateDocument(
      const DocumentRecord& record) = 0;
  [[nodiscard]] virtual absl::StatusOr<DocumentRecord> GetDocument(
      std::string_view tenant, std::string_view document_id) = 0;
  [[nodiscard]] virtual absl::StatusOr<std::vector<int32_t>> GetTokens(
      std::string_view tenant, std::string_view document_id) = 0;
  // Documents of `tenant` ordered by id; page_size 0 means 100.
  [[nodiscard]] virtual absl::StatusOr<DocumentPage> ListDocuments(
      std::string_view tenant, int page_size, std::string_view page_token) = 0;
  // Deletes the record, its tokens, and the states it names that no other
  // record names. Returns the number of states deleted.
  [[nodiscard]] virtual absl::StatusOr<int64_t> DeleteDocument(
      std::string_view tenant, std::string_view document_id) = 0;

  // Counts a state recomputed by a caller after a miss.
  virtual void RecordRecompute() = 0;
  virtual StoreStats Stats() = 0;

  // Administration (`twice store ...`). Each may take as long as reading or
  // rewriting the whole store; serving goes on meanwhile.
  // Reads and verifies every stored value; bad ones are reported, never
  // served.
  [[nodiscard]] virtual absl::StatusOr<VerifyReport> Verify(
      const VerifyOptions& options) = 0;
  // Compacts every column family fully, reclaiming deleted space.
  [[nodiscard]] virtual absl::StatusOr<CompactReport> Compact() = 0;
  // Drops orphaned references and blocks, and
  // rewrites blob files to reclaim space of deleted states.
  [[nodiscard]] virtual absl::StatusOr<GcReport> CollectGarbage() = 0;
  // Writes a consistent, openable copy of the whole store into `dir` (which
  // must not exist; its parent must): a RocksDB checkpoint, hard links where
  // the file system allows, copies otherwise. Serving goes on meanwhile.
  // RestoreRocksDbStore turns it back into a store.
  [[nodiscard]] virtual absl::StatusOr<BackupReport> Backup(
      const std::string& dir) = 0;

  // The store that holds the record, tokens and states of `document_id`.
  // A store sharded over several replicas returns the replica that owns the
  // document; every other store returns itself. Never null; valid as long
  // as this store.
  virtual StateStore* ForDocument(std::string_view tenant,
                                  std::string_view document_id) {
    (void)tenant;
    (void)document_id;
    return this;
  }
};

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
[[nodiscard]] absl::StatusOr<std::unique_ptr<StateStore>> OpenRocksDbStore(
    const RocksDbStoreOptions& options);

// Restores a backup offline: copies the checkpoint in `backup_dir` (made by
// StateStore::Backup) into options.path, which must be missing or empty,
// then opens the restored store and verifies every value. No server may own
// options.path meanwhile. FAILED_PRECONDITION when options.path holds
// files; the verify report otherwise (its `bad` list empty when the backup
// is intact).
[[nodiscard]] absl::StatusOr<VerifyReport> RestoreRocksDbStore(
    const std::string& backup_dir, const RocksDbStoreOptions& options);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_STATE_STORE_H_
