// RadosStateStore: the StateStore (storage/state_store.h) on a Ceph RADOS
// pool, for deployments past one machine: every prefill and decode process
// reads and writes the pool directly, and RADOS replicates and places the
// objects (a write is acknowledged once durable on the pool's replicas).
//
// Layout (pool `<prefix>-states`):
//   s.<hex key>   a whole state or a chunked state's manifest: the same
//                 enveloped, checksummed values as the RocksDB store
//                 (state_value.h, block_manifest.h)
//   b.<hex key>   one block of a chunked state (a state value)
// with the index fields in xattrs (twice.form, twice.tenant,
// twice.recompute_tokens, twice.written_unix_ms; twice.parts on a value
// striped over the objects p.<name>.1.. because it is larger than one
// object may be written at once). Objects are immutable and
// named by their content address, so every write is an exclusive create and a
// name that exists already holds the same value. A chunked state's blocks are
// written before its manifest, so a crash leaves only unreferenced blocks.
//
// What RADOS does not do for a cache, the store's janitor will: the byte
// budget and eviction, and collecting blocks no manifest names (DeleteState
// of a chunked state removes only its manifest, since other states may
// share its blocks). Every call is bounded by the cluster connection's
// operation deadline (rados_cluster.h). Thread-safe: librados I/O contexts
// are.
#ifndef TWICE_STORAGE_RADOS_RADOS_STATE_STORE_H_
#define TWICE_STORAGE_RADOS_RADOS_STATE_STORE_H_

#include <atomic>
#include <memory>
#include <optional>
#include <rados/librados.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/rados/rados_cluster.h"
#include "storage/state_store.h"

namespace twice::storage {

class RadosStateStore final : public StateStore {
 public:
  // Values past this are striped over several objects (rados_objects.h,
  // PutStripedObject): below the cluster's 90 MiB write limit.
  static constexpr uint64_t kDefaultPartBytes = uint64_t{64} << 20;

  // The states pool `pool` of `cluster` (created when missing), which must
  // outlive the store; values larger than `part_bytes` are striped.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RadosStateStore>> Open(
      RadosCluster& cluster, const std::string& pool,
      uint64_t part_bytes = kDefaultPartBytes);

  absl::Status PutState(const StateKey& key, std::string_view blob,
                        const PutStateOptions& options) override;
  absl::StatusOr<std::string> GetState(const StateKey& key) override;
  absl::StatusOr<bool> HasState(const StateKey& key) override;
  absl::Status DeleteState(const StateKey& key) override;
  absl::Status DiscardCorruptState(const StateKey& key) override;
  absl::Status PutStateBlocks(const StateKey& key,
                              const std::optional<StateKey>& base,
                              absl::Span<const std::string_view> new_blocks,
                              const PutStateOptions& options) override;
  absl::StatusOr<std::vector<std::string>> GetStateBlocks(
      const StateKey& key) override;
  // In the pool's own order (hash order, not key order); the page token is
  // a librados object cursor.
  absl::StatusOr<StatePage> ListStates(int page_size,
                                       std::string_view page_token) override;
  void RecordRecompute() override { recomputes_.fetch_add(1); }

  // Values found corrupt (and deleted) since the store opened.
  int64_t corruptions() const { return corruptions_.load(); }
  int64_t recomputes() const { return recomputes_.load(); }
  // Reads that found the state, and that missed (missing or corrupt).
  int64_t hits() const { return hits_.load(); }
  int64_t misses() const { return misses_.load(); }

 private:
  RadosStateStore(librados::IoCtx pool, uint64_t part_bytes)
      : pool_(std::move(pool)), part_bytes_(part_bytes) {}

  // The verified blocks of the state under `key` (a whole state is its
  // one block); NOT_FOUND, after deleting it, when it is corrupt.
  absl::StatusOr<std::vector<std::string>> ReadBlocks(const StateKey& key);
  // Deletes a value found corrupt and answers the miss the caller sees.
  absl::Status Corrupt(const std::string& name, const absl::Status& why);
  // Counts a read's outcome as a hit or a miss.
  void CountRead(const absl::Status& status);

  librados::IoCtx pool_;
  const uint64_t part_bytes_;
  std::atomic<int64_t> corruptions_{0};
  std::atomic<int64_t> recomputes_{0};
  std::atomic<int64_t> hits_{0};
  std::atomic<int64_t> misses_{0};
};

// Object names of the layout above.
std::string StateObjectName(const StateKey& key);
std::string BlockObjectName(const StateKey& key);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_RADOS_RADOS_STATE_STORE_H_
