// StateStore: durable, verified storage of state blobs and document records.
//
// Contract:
// - Keys and bytes only: a state blob is opaque here. Every value is wrapped
//   in an envelope (magic, format version, kind, length, checksum) that is
//   verified on every read. A value that fails verification is deleted,
//   counted as a corruption and reported as NOT_FOUND (a miss), so the caller
//   recomputes it; it is never returned.
// - PutDocument commits the record and its tokens in one atomic write; the
//   caller stores the states a record names before the record.
// - Ephemeral states live apart from durable ones and are for states
//   produced and consumed inside one request.
// - Thread safety: every method may be called concurrently.
// - Errors: NOT_FOUND (missing), INVALID_ARGUMENT (bad request),
//   DATA_LOSS (a stored document record or token blob is corrupt),
//   UNAVAILABLE (I/O that may succeed on retry), INTERNAL otherwise.
#ifndef TWICE_STORAGE_STATE_STORE_H_
#define TWICE_STORAGE_STATE_STORE_H_

#include <cstdint>
#include <memory>
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
  // Store among ephemeral states. Default: false.
  bool ephemeral = false;
  // Prefill tokens the state saves; eviction weighs it. Default: 0.
  int64_t recompute_tokens = 0;
};

struct DocumentPage {
  std::vector<DocumentRecord> records;
  std::string next_page_token;  // empty when there are no more
};

struct StoreStats {
  int64_t state_bytes = 0;
  int64_t state_count = 0;
  int64_t document_count = 0;
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t evictions = 0;
  int64_t corruptions = 0;
  int64_t recomputes = 0;
};

class StateStore {
 public:
  virtual ~StateStore() = default;

  [[nodiscard]] virtual absl::Status PutState(
      const StateKey& key, std::string_view blob,
      const PutStateOptions& options) = 0;
  [[nodiscard]] virtual absl::StatusOr<std::string> GetState(
      const StateKey& key, bool ephemeral) = 0;
  // Whether the state is stored (not verified; GetState verifies).
  [[nodiscard]] virtual absl::StatusOr<bool> HasState(const StateKey& key,
                                                      bool ephemeral) = 0;
  [[nodiscard]] virtual absl::Status DeleteState(const StateKey& key,
                                                 bool ephemeral) = 0;

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
};

struct RocksDbStoreOptions {
  // Directory of the database; created when missing. Required.
  std::string path;
  // Sync the WAL on every write so an acknowledged write survives a power
  // loss. Default: true.
  bool sync_writes = true;
  // Seconds an ephemeral state lives. Default: 600.
  int64_t ephemeral_ttl_seconds = 600;
};

// Opens (or creates) the RocksDB-backed store. Exactly one process may own a
// directory: a second open fails with UNAVAILABLE.
[[nodiscard]] absl::StatusOr<std::unique_ptr<StateStore>> OpenRocksDbStore(
    const RocksDbStoreOptions& options);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_STATE_STORE_H_
