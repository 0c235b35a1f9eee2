// StoreAdmin: what `twice store ...` does to a whole store — counters,
// verification, compaction, garbage collection and backups. Each may take
// as long as reading or rewriting the whole store; serving goes on
// meanwhile.
#ifndef TWICE_STORAGE_STORE_ADMIN_H_
#define TWICE_STORAGE_STORE_ADMIN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace twice::storage {

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
  // RADOS (storage/rados/rados_record_watch.h), this process only: record
  // commits that some watcher left unacknowledged, each of which waited
  // out the readers' lease before returning (a hung or cut-off
  // orchestrator), and the changes this process's watches saw (notifies
  // and watch errors).
  int64_t record_notifies_unacknowledged = 0;
  int64_t record_watch_changes = 0;
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

class StoreAdmin {
 public:
  virtual ~StoreAdmin() = default;

  virtual StoreStats Stats() = 0;
  // Reads and verifies every stored value; bad ones are reported, never
  // served.
  [[nodiscard]] virtual absl::StatusOr<VerifyReport> Verify(
      const VerifyOptions& options) = 0;
  // Compacts every column family fully, reclaiming deleted space.
  [[nodiscard]] virtual absl::StatusOr<CompactReport> Compact() = 0;
  // Drops orphaned references and blocks, and rewrites blob files to
  // reclaim space of deleted states.
  [[nodiscard]] virtual absl::StatusOr<GcReport> CollectGarbage() = 0;
  // Writes a consistent, openable copy of the whole store into `dir` (which
  // must not exist; its parent must): a RocksDB checkpoint, hard links where
  // the file system allows, copies otherwise. Serving goes on meanwhile.
  // RestoreRocksDbStore turns it back into a store.
  [[nodiscard]] virtual absl::StatusOr<BackupReport> Backup(
      const std::string& dir) = 0;
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_STORE_ADMIN_H_
