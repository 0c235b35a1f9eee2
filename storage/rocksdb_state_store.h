// The RocksDB implementation of StateStore (state_store.h has the contract).
//
// Column families:
//   documents    tenant '\0' document_id -> record envelope
//   tokens       tenant '\0' document_id -> token envelope
//   states       32-byte state key -> state envelope (BlobDB: values of
//                64 KiB and more live in blob files, out of the LSM tree)
//   state_index  32-byte state key -> index envelope: stored size,
//                recompute_tokens, write time (state_value.h)
//   ephemeral    32-byte state key -> state envelope, expired by age
//                (ephemeral_ttl.h)
//
// state_index is written and deleted in the same WriteBatch as states. It
// exists so that open can count durable states, HasState can answer, and the
// byte-budget evictor can rank states by recompute cost per byte, all without
// reading blobs (RocksDB 7.8 iterators read every blob they pass over, and a
// single unreadable blob would stop a scan).
//
// Stats count durable states only; ephemeral ones expire on their own.
// Mutations of one durable state are serialized by a lock stripe picked by
// the key, so the counters match what is stored; document writes are
// serialized by one mutex so DeleteDocument's "named by no other record" scan
// cannot race a PutDocument.
#ifndef TWICE_STORAGE_ROCKSDB_STATE_STORE_H_
#define TWICE_STORAGE_ROCKSDB_STATE_STORE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocksdb/db.h"
#include "storage/ephemeral_ttl.h"
#include "storage/state_store.h"
#include "storage/state_value.h"

namespace twice::storage {

// Column family names, for tools and tests that open the directory raw.
inline constexpr char kDocumentsFamily[] = "documents";
inline constexpr char kTokensFamily[] = "tokens";
inline constexpr char kStatesFamily[] = "states";
inline constexpr char kStateIndexFamily[] = "state_index";
inline constexpr char kEphemeralFamily[] = "ephemeral";

// Values at least this large are stored in blob files (states family).
inline constexpr uint64_t kStateMinBlobBytes = 64 * 1024;

class RocksDbStateStore final : public StateStore {
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
  [[nodiscard]] absl::StatusOr<std::string> GetState(const StateKey& key,
                                                     bool ephemeral) override;
  [[nodiscard]] absl::StatusOr<bool> HasState(const StateKey& key,
                                              bool ephemeral) override;
  // Deleting a state that is not stored is OK.
  [[nodiscard]] absl::Status DeleteState(const StateKey& key,
                                         bool ephemeral) override;

  [[nodiscard]] absl::Status PutDocument(
      const DocumentRecord& record, absl::Span<const int32_t> tokens) override;
  // token_count may not change (tokens are not rewritten); INVALID_ARGUMENT
  // if it does, NOT_FOUND if the document is not stored.
  [[nodiscard]] absl::Status UpdateDocument(
      const DocumentRecord& record) override;
  [[nodiscard]] absl::StatusOr<DocumentRecord> GetDocument(
      std::string_view tenant, std::string_view document_id) override;
  [[nodiscard]] absl::StatusOr<std::vector<int32_t>> GetTokens(
      std::string_view tenant, std::string_view document_id) override;
  [[nodiscard]] absl::StatusOr<DocumentPage> ListDocuments(
      std::string_view tenant, int page_size,
      std::string_view page_token) override;
  [[nodiscard]] absl::StatusOr<int64_t> DeleteDocument(
      std::string_view tenant, std::string_view document_id) override;

  void RecordRecompute() override;
  StoreStats Stats() override;

  // Flushes and fully compacts the ephemeral family now, so the compaction
  // filter drops every expired state (RocksDB otherwise picks the time).
  [[nodiscard]] absl::Status CompactEphemeral();

 private:
  static constexpr size_t kStateLockStripes = 64;

  // How a stored state value looked when read.
  enum class Found { kMissing, kGood, kCorrupt, kExpired };
  struct StateRead {
    Found found = Found::kMissing;
    std::string blob;    // kGood only
    std::string reason;  // kCorrupt only
  };

  explicit RocksDbStateStore(const RocksDbStoreOptions& options);

  [[nodiscard]] absl::Status OpenDb();
  [[nodiscard]] absl::Status LoadCounters();

  rocksdb::ColumnFamilyHandle* StateFamily(bool ephemeral) const {
    return ephemeral ? ephemeral_ : states_;
  }
  std::mutex& StateLock(const StateKey& key) {
    return state_locks_[key.digest[0] % kStateLockStripes];
  }
  [[nodiscard]] absl::StatusOr<StateRead> ReadState(const StateKey& key,
                                                    bool ephemeral,
                                                    bool copy_blob);
  // nullopt when there is no index entry; DATA_LOSS when it does not decode.
  [[nodiscard]] absl::StatusOr<std::optional<StateIndexEntry>> ReadIndex(
      const StateKey& key);
  // Deletes a state value that is corrupt or expired, with its index entry,
  // and updates the counters. Caller holds StateLock(key).
  [[nodiscard]] absl::Status RemoveBadState(const StateKey& key,
                                            bool ephemeral);

  static std::string DocumentKey(std::string_view tenant,
                                 std::string_view document_id);
  [[nodiscard]] absl::StatusOr<DocumentRecord> ReadRecord(
      std::string_view tenant, std::string_view document_id);

  const RocksDbStoreOptions options_;
  rocksdb::WriteOptions write_options_;

  std::atomic<int64_t> state_bytes_{0};
  std::atomic<int64_t> state_count_{0};
  std::atomic<int64_t> document_count_{0};
  std::atomic<int64_t> hits_{0};
  std::atomic<int64_t> misses_{0};
  std::atomic<int64_t> evictions_{0};  // no evictor yet; see state_index
  std::atomic<int64_t> corruptions_{0};
  std::atomic<int64_t> recomputes_{0};

  // Declared before db_: RocksDB calls it until the database is closed.
  std::unique_ptr<EphemeralTtlFilter> ttl_filter_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // owned; closed first
  rocksdb::ColumnFamilyHandle* documents_ = nullptr;
  rocksdb::ColumnFamilyHandle* tokens_ = nullptr;
  rocksdb::ColumnFamilyHandle* states_ = nullptr;
  rocksdb::ColumnFamilyHandle* state_index_ = nullptr;
  rocksdb::ColumnFamilyHandle* ephemeral_ = nullptr;

  std::array<std::mutex, kStateLockStripes> state_locks_;
  std::mutex document_mu_;
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_ROCKSDB_STATE_STORE_H_
