// StateStore: durable, verified storage of state blobs (the cache of a
// document's reads; document_catalog.h keeps the truth they are computed
// from).
//
// Contract:
// - Keys and bytes only: a state blob is opaque here. Every value is wrapped
//   in an envelope (magic, format version, kind, length, checksum) that is
//   verified on every read. A value that fails verification is deleted,
//   counted as a corruption and reported as NOT_FOUND (a miss), so the caller
//   recomputes it; it is never returned.
// - States are a cache: any state may be evicted or found corrupt, and is
//   then recomputed from the document's tokens.
// - Bounded: with a byte budget, puts evict states, lowest score
//   (recompute cost per byte and recency, state_cache_index.h) first; states
//   that a pinned record names are never evicted. Readers never wait for an
//   eviction. With a per-tenant budget, a tenant's put evicts only that
//   tenant's states to stay within it, and fails when they cannot make room.
// - Chunked states (chunk-KV) are append-only blocks (block_manifest.h):
//   PutStateBlocks writes only the blocks a base state lacks; GetState of a
//   chunked state returns its blocks assembled.
// - Thread safety: every method may be called concurrently.
// - Errors: NOT_FOUND (missing), INVALID_ARGUMENT (bad request),
//   RESOURCE_EXHAUSTED (the disk is nearly full, or a put does not fit its
//   tenant's budget), UNAVAILABLE (I/O that may succeed on retry), INTERNAL
//   otherwise.
#ifndef TWICE_STORAGE_STATE_STORE_H_
#define TWICE_STORAGE_STATE_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
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

// One stored state as ListStates reports it.
struct StateListing {
  StateKey key;
  // Bytes the store holds under the key itself (a chunked state's blocks
  // are counted on their own and go when no state names them).
  int64_t stored_bytes = 0;
  bool chunked = false;
  std::string tenant{};  // PutStateOptions::tenant
  int64_t written_unix_ms = 0;
};

struct StatePage {
  std::vector<StateListing> states;
  // Empty on the last page; else where the next page starts.
  std::string next_page_token;
};

// Most states one ListStates page holds; also the default page size.
inline constexpr int kMaxStatePageSize = 1000;

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
  // Deleting a state that is not stored is OK.
  [[nodiscard]] virtual absl::Status DeleteState(const StateKey& key) = 0;
  // Deletes a state that GetState returned but its consumer found corrupt
  // (the engine's codec rejected it): counted as a corruption, and the read
  // that returned it as a miss rather than a hit.
  [[nodiscard]] virtual absl::Status DiscardCorruptState(
      const StateKey& key) = 0;

  // Stores the chunked state `key` as the blocks of `base` (a chunked state,
  // when given) followed by `new_blocks`, writing only the new blocks and a
  // manifest, in one atomic write. NOT_FOUND when `base` is not stored whole
  // (missing, evicted or corrupt): write every block then.
  [[nodiscard]] virtual absl::Status PutStateBlocks(
      const StateKey& key, const std::optional<StateKey>& base,
      absl::Span<const std::string_view> new_blocks,
      const PutStateOptions& options) = 0;
  // The verified blocks of `key`, in order (a whole state is one block).
  // A missing or corrupt block makes the state a miss (NOT_FOUND).
  [[nodiscard]] virtual absl::StatusOr<std::vector<std::string>> GetStateBlocks(
      const StateKey& key) = 0;

  // Every stored state (whole or chunked, not the blocks of chunked
  // states), in an order the store keeps (RocksDB: key order; RADOS: its
  // placement order), `page_size` at a time (0 = kMaxStatePageSize)
  // from `page_token` (empty = the first page, else the previous page's
  // next_page_token). For garbage collection across the store's documents:
  // a collector lists the states and deletes those no record names. The
  // pages are no snapshot: a state put or deleted while paging may or may
  // not be listed, and none is listed twice. INVALID_ARGUMENT for a
  // page_size outside [0, kMaxStatePageSize] or a token no page returned.
  [[nodiscard]] virtual absl::StatusOr<StatePage> ListStates(
      int page_size, std::string_view page_token) = 0;

  // Counts a state recomputed by a caller after a miss.
  virtual void RecordRecompute() = 0;
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_STATE_STORE_H_
