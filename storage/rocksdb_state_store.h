// The RocksDB implementation of Store (state_store.h, document_catalog.h
// and store_admin.h have the contracts;
// storage/FORMAT.md the bytes on disk).
//
// Column families:
//   documents    tenant '\0' document_id -> record envelope
//   tokens       tenant '\0' document_id -> token envelope
//   states       32-byte key -> state envelope, block-manifest envelope or
//                block (a state envelope). BlobDB: values of 64 KiB and more
//                live in blob files, out of the LSM tree
//   state_index  32-byte key -> index envelope: stored size,
//                recompute_tokens, write time, FLOPs per token, form,
//                tenant (state_value.h)
//   refs         32-byte key + document key -> pin flag (state_ref.h)
//
// Stores written before second reads moved into the decode call also hold
// an "ephemeral" family; Open drops it.
//
// state_index is written and deleted in the same WriteBatch as states, and
// refs in the same WriteBatch as records. At open both are loaded into a
// StateCacheIndex, so counting, HasState, pins and eviction never read a
// blob (RocksDB 7.8 iterators read every blob they pass over, and a single
// unreadable blob would stop a scan).
//
// Locking. Mutations of a durable key are serialized by a lock stripe picked
// by the key; an operation that touches several keys takes their stripes in
// ascending order. Document writes are serialized by document_mu_, taken
// before any stripe. Evictions are serialized by evict_mu_, taken before any
// stripe and never while holding one. Reads of a good state take no lock
// but the index's shared one, so eviction never blocks a reader: a reader
// racing an eviction gets either the whole value or NOT_FOUND.
#ifndef TWICE_STORAGE_ROCKSDB_STATE_STORE_H_
#define TWICE_STORAGE_ROCKSDB_STATE_STORE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"
#include "storage/block_manifest.h"
#include "storage/disk_space_guard.h"
#include "storage/rocksdb_store.h"
#include "storage/state_cache_index.h"
#include "storage/state_value.h"
#include "storage/store.h"

namespace twice::storage {

// Column family names, for tools and tests that open the directory raw.
inline constexpr char kDocumentsFamily[] = "documents";
inline constexpr char kTokensFamily[] = "tokens";
inline constexpr char kStatesFamily[] = "states";
inline constexpr char kStateIndexFamily[] = "state_index";
inline constexpr char kRefsFamily[] = "refs";
// The family of states that lived for one request (dropped at open).
inline constexpr char kLegacyEphemeralFamily[] = "ephemeral";

// Values at least this large are stored in blob files (states family).
inline constexpr uint64_t kStateMinBlobBytes = 64 * 1024;

class RocksDbStateStore final : public Store {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RocksDbStateStore>> Open(
      const RocksDbStoreOptions& options);

  RocksDbStateStore(const RocksDbStateStore&) = delete;
  RocksDbStateStore& operator=(const RocksDbStateStore&) = delete;
  // Closes the database; the directory may be opened again afterwards.
  ~RocksDbStateStore() override;

  [[nodiscard]] absl::Status PutState(const StateKey& key,
                                      std::string_view blob,
                                      const PutStateOptions& options) override;
  [[nodiscard]] absl::StatusOr<std::string> GetState(
      const StateKey& key) override;
  [[nodiscard]] absl::StatusOr<bool> HasState(const StateKey& key) override;
  // Pages through the state index column family (every durable key's
  // size, form and tenant) without reading a blob.
  [[nodiscard]] absl::StatusOr<StatePage> ListStates(
      int page_size, std::string_view page_token) override;
  // Deleting a state that is not stored is OK.
  [[nodiscard]] absl::Status DeleteState(const StateKey& key) override;
  [[nodiscard]] absl::Status DiscardCorruptState(const StateKey& key) override;
  [[nodiscard]] absl::Status PutStateBlocks(
      const StateKey& key, const std::optional<StateKey>& base,
      absl::Span<const std::string_view> new_blocks,
      const PutStateOptions& options) override;
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> GetStateBlocks(
      const StateKey& key) override;

  [[nodiscard]] absl::Status PutDocument(
      const DocumentRecord& record, absl::Span<const int32_t> tokens) override;
  // token_count may not change (tokens are not rewritten); INVALID_ARGUMENT
  // if it does, NOT_FOUND if the document is not stored.
  [[nodiscard]] absl::Status UpdateDocument(
      const DocumentRecord& record) override;
  [[nodiscard]] absl::StatusOr<DocumentRecord> GetDocument(
      const DocumentRef& document) override;
  [[nodiscard]] absl::StatusOr<std::vector<int32_t>> GetTokens(
      const DocumentRef& document) override;
  [[nodiscard]] absl::StatusOr<DocumentPage> ListDocuments(
      std::string_view tenant, int page_size,
      std::string_view page_token) override;
  [[nodiscard]] absl::StatusOr<int64_t> DeleteDocument(
      const DocumentRef& document) override;

  void RecordRecompute() override;
  StoreStats Stats() override;

  [[nodiscard]] absl::StatusOr<VerifyReport> Verify(
      const VerifyOptions& options) override;
  [[nodiscard]] absl::StatusOr<CompactReport> Compact() override;
  [[nodiscard]] absl::StatusOr<GcReport> CollectGarbage() override;
  [[nodiscard]] absl::StatusOr<BackupReport> Backup(
      const std::string& dir) override;

  // Bytes of the durable values (whole states, manifests and blocks) of
  // `tenant`: what tenant_state_budget_bytes bounds. 0 for the empty tenant.
  int64_t TenantStateBytes(std::string_view tenant) const;

 private:
  static constexpr size_t kStateLockStripes = 64;
  using KeySet = StateKeySet;
  using StripeLocks = std::vector<std::unique_lock<std::mutex>>;

  // How a stored state value looked when read.
  enum class Found { kMissing, kGood, kCorrupt };
  struct StateRead {
    Found found = Found::kMissing;
    std::string blob;    // kGood whole states, when asked to copy
    std::string reason;  // kCorrupt only
    std::optional<BlockManifest> manifest;  // kGood chunked states
  };
  // What one DeleteDurable removed.
  struct Deleted {
    int64_t states = 0;
    int64_t blocks = 0;
    int64_t bytes = 0;
  };

  explicit RocksDbStateStore(const RocksDbStoreOptions& options);

  [[nodiscard]] absl::Status OpenDb();
  // Rebuilds the in-memory index and counters from state_index, the
  // manifests, refs and documents.
  [[nodiscard]] absl::Status Load();
  [[nodiscard]] absl::Status LoadRefs();

  static size_t Stripe(const StateKey& key) {
    return key.digest[0] % kStateLockStripes;
  }
  StripeLocks LockStripes(const KeySet& keys);
  // Locks the stripes of `keys` and of every block that deleting them would
  // orphan (re-checked under the locks, since another manifest may be
  // written meanwhile). Returns those blocks in `orphans`.
  StripeLocks LockForDelete(const KeySet& keys, KeySet* orphans);
  // Blocks that no manifest would name once the manifests in `keys` are gone.
  KeySet OrphansIfRemoved(const KeySet& keys) const;

  [[nodiscard]] absl::StatusOr<StateRead> ReadState(const StateKey& key,
                                                    bool copy_blob);
  // Reads and verifies the blocks a manifest lists; `bad` says why not.
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> ReadBlocks(
      const BlockManifest& manifest, std::string* bad, bool* corrupt);
  // Appends the deletion of durable `keys` and `orphans` (values and index
  // entries) to `batch` and returns what will go. Caller holds their stripes.
  Deleted AppendDeletes(const KeySet& keys, const KeySet& orphans,
                        rocksdb::WriteBatch& batch);
  // Applies a committed AppendDeletes to the index.
  void ForgetDeleted(const KeySet& keys, const KeySet& orphans);
  // Deletes durable `keys` and the blocks only they name in one WriteBatch.
  // `keep`, asked under the locks, spares a key.
  [[nodiscard]] absl::StatusOr<Deleted> DeleteDurable(
      const KeySet& keys, const std::function<bool(const StateKey&)>& keep,
      const rocksdb::WriteOptions& write_options);
  // Deletes a state value found corrupt, unless a concurrent put
  // has replaced it by a good one. Returns the value as read under the lock
  // (deleted unless kGood or kMissing).
  [[nodiscard]] absl::StatusOr<StateRead> RemoveBadState(const StateKey& key);

  // Evicts until `incoming` more bytes of `tenant` fit its budget and the
  // store's (or only pinned and `exclude`d states are left), then reserves
  // them; the caller calls Unreserve(incoming, tenant) once its write is
  // committed or has failed. RESOURCE_EXHAUSTED, nothing reserved, when the
  // tenant's own states cannot make room in its budget.
  [[nodiscard]] absl::Status MakeRoom(int64_t incoming, const KeySet& exclude,
                                      std::string_view tenant);
  void Unreserve(int64_t incoming, std::string_view tenant);
  // The tenant part of MakeRoom: evicts states of `tenant` only. Caller
  // holds evict_mu_.
  [[nodiscard]] absl::Status MakeTenantRoomLocked(int64_t incoming,
                                                  const KeySet& exclude,
                                                  std::string_view tenant);
  static KeySet VictimKeys(const std::vector<EvictionVictim>& victims);
  // Bytes that deleting `keys` would free, the blocks only they name
  // included.
  int64_t FreedBytes(const KeySet& keys) const;
  // Deletes `keys` (those still unpinned and stored) and counts them as
  // evictions.
  [[nodiscard]] absl::Status Evict(const KeySet& keys);
  bool TenantBounded(std::string_view tenant) const {
    return options_.tenant_state_budget_bytes > 0 && !tenant.empty();
  }
  int64_t TenantReserved(std::string_view tenant);

  static std::string DocumentKey(std::string_view tenant,
                                 std::string_view document_id);
  // Counts `status` in catalog_corruptions_ when it is DATA_LOSS (a record
  // or token blob found corrupt: reported and kept, never recomputed), and
  // returns it.
  [[nodiscard]] absl::Status CountCatalogLoss(absl::Status status);
  [[nodiscard]] absl::StatusOr<DocumentRecord> ReadRecord(
      std::string_view tenant, std::string_view document_id);
  // The states `record` names (segments and mode states, once each).
  static KeySet NamedStates(const DocumentRecord& record);
  // States named by the refs of `document_key`, by scanning refs (for a
  // record that no longer decodes). Values: pin flags.
  [[nodiscard]] absl::StatusOr<std::vector<std::pair<StateKey, bool>>>
  ScanRefsOf(std::string_view document_key);
  // Writes `record` (and `tokens`, when given) with its refs. Caller holds
  // document_mu_.
  [[nodiscard]] absl::Status WriteRecordLocked(
      const DocumentRecord& record, const absl::Span<const int32_t>* tokens);
  // Rewrites every ref of `record` (open only: no concurrent writers). With
  // `scan_existing`, its present refs are found by a scan and replaced.
  [[nodiscard]] absl::Status RebuildRefsLocked(const DocumentRecord& record,
                                               bool scan_existing);
  // For Verify: a scan of `family` ended with `status`. A damaged block
  // (DATA_LOSS) is added to `report` as a bad "(scan)" entry saying how far
  // the scan got (`after`, the last key reached, printable; may be empty)
  // and counted; the result is then OK. Any other error is returned.
  [[nodiscard]] absl::Status ScanStopped(std::string_view family,
                                         const rocksdb::Status& status,
                                         std::string_view after,
                                         VerifyReport& report);
  [[nodiscard]] int64_t DiskBytes();

  const RocksDbStoreOptions options_;
  const DiskSpaceGuard disk_;
  rocksdb::WriteOptions write_options_;
  // Evictions and repairs: losing one in a crash only brings a state back.
  rocksdb::WriteOptions unsynced_write_options_;
  // Reads of state values skip RocksDB's own checksums: every value is an
  // envelope whose XXH3 covers all of it and is always verified, and
  // Debian's RocksDB computes CRC32C in software (about 1.3 GB/s here),
  // which alone would cost more than reading a multi-megabyte state.
  rocksdb::ReadOptions state_read_options_;

  StateCacheIndex index_;
  std::atomic<int64_t> document_count_{0};
  std::atomic<int64_t> hits_{0};
  std::atomic<int64_t> misses_{0};
  std::atomic<int64_t> evictions_{0};
  std::atomic<int64_t> evicted_bytes_{0};
  std::atomic<int64_t> corruptions_{0};
  std::atomic<int64_t> catalog_corruptions_{0};
  std::atomic<int64_t> recomputes_{0};
  // Bytes of puts that made room and have not yet committed (MakeRoom).
  std::atomic<int64_t> reserved_bytes_{0};
  // The same per tenant, for tenant_state_budget_bytes (non-zero only).
  // Added to under evict_mu_ (so two puts of a tenant never count the same
  // room) and guarded by tenant_reserved_mu_, which commits take alone.
  std::unordered_map<std::string, int64_t> tenant_reserved_;

  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // owned; closed first
  rocksdb::ColumnFamilyHandle* documents_ = nullptr;
  rocksdb::ColumnFamilyHandle* tokens_ = nullptr;
  rocksdb::ColumnFamilyHandle* states_ = nullptr;
  rocksdb::ColumnFamilyHandle* state_index_ = nullptr;
  rocksdb::ColumnFamilyHandle* refs_ = nullptr;

  std::array<std::mutex, kStateLockStripes> state_locks_;
  std::mutex document_mu_;
  std::mutex evict_mu_;
  std::mutex tenant_reserved_mu_;  // taken after evict_mu_, never before
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_ROCKSDB_STATE_STORE_H_
