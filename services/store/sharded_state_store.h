// ShardedStateStore: one Store over several store replicas (the `store`
// role behind --store-address=A,B,...), sharded by document.
//
// Placement: a document's record, tokens and states live on one replica,
// chosen by rendezvous (highest random weight) hashing of (tenant,
// document id) over the replicas' names. Every replica scores each document
// with a hash of (replica name, tenant, document id) and the highest score
// owns it, so adding or removing one replica moves only the documents whose
// owner it is or becomes (about 1/N of them). Replica names are the
// addresses as configured: use stable names (a StatefulSet's per-pod DNS
// names), never addresses that change on restart.
//
// Routing:
// - Document calls (PutDocument, GetDocument, GetTokens, UpdateDocument,
//   DeleteDocument) go to the owner of their document.
// - ForDocument(document) returns the owner, so callers that know the
//   document put and get its states there (the prefill and decode services
//   learn it from PrefillHeader.document_id / GenerateRequest.document_id).
// - State calls made on this store itself, with no document known, write to
//   the replica that rendezvous hashing of the state key picks, and read by
//   asking that replica first and then the others; deletes go to every
//   replica.
// - ListStates lists the replicas one after the other.
// - ListDocuments merges the replicas' pages in document-id order; Stats,
//   Verify, Compact, Gc and Backup run on every replica and add up.
//
// Changing the replica list of a running deployment moves document
// ownership: migrate by backup and restore (deploy/README.md) rather than by
// editing the list in place. Thread-safe: the replicas are.
#ifndef TWICE_SERVICES_STORE_SHARDED_STATE_STORE_H_
#define TWICE_SERVICES_STORE_SHARDED_STATE_STORE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "storage/store.h"

namespace twice::services {

struct StoreShard {
  std::string name;  // stable identity, hashed for placement (the address)
  std::unique_ptr<storage::Store> store;
};

// The rendezvous weight of `shard` for `item`: a 64-bit hash of both, the
// same on every machine and every build (FNV-1a with a final mix).
uint64_t RendezvousWeight(std::string_view shard, std::string_view item);

class ShardedStateStore final : public storage::Store {
 public:
  // At least one shard; names must be distinct (INVALID_ARGUMENT otherwise).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ShardedStateStore>>
  Create(std::vector<StoreShard> shards);

  // Index (into the shards given to Create) of the owner of a document.
  size_t OwnerOf(std::string_view tenant, std::string_view document_id) const;

  storage::Store* ForDocument(const storage::DocumentRef& document) override;

  absl::Status PutState(const storage::StateKey& key, std::string_view blob,
                        const storage::PutStateOptions& options) override;
  absl::StatusOr<std::string> GetState(const storage::StateKey& key) override;
  absl::StatusOr<bool> HasState(const storage::StateKey& key) override;
  absl::Status DeleteState(const storage::StateKey& key) override;
  absl::Status DiscardCorruptState(const storage::StateKey& key) override;
  // Replica by replica, each in key order; the page token names the
  // replica and its own token ("<replica index>:<token>").
  absl::StatusOr<storage::StatePage> ListStates(
      int page_size, std::string_view page_token) override;
  absl::Status PutStateBlocks(const storage::StateKey& key,
                              const std::optional<storage::StateKey>& base,
                              absl::Span<const std::string_view> new_blocks,
                              const storage::PutStateOptions& options) override;
  absl::StatusOr<std::vector<std::string>> GetStateBlocks(
      const storage::StateKey& key) override;
  absl::Status PutDocument(const storage::DocumentRecord& record,
                           absl::Span<const int32_t> tokens) override;
  absl::Status UpdateDocument(const storage::DocumentRecord& record) override;
  absl::StatusOr<storage::DocumentRecord> GetDocument(
      const storage::DocumentRef& document) override;
  absl::StatusOr<std::vector<int32_t>> GetTokens(
      const storage::DocumentRef& document) override;
  absl::StatusOr<storage::DocumentPage> ListDocuments(
      std::string_view tenant, int page_size,
      std::string_view page_token) override;
  absl::StatusOr<int64_t> DeleteDocument(
      const storage::DocumentRef& document) override;
  void RecordRecompute() override;
  storage::StoreStats Stats() override;
  absl::StatusOr<storage::VerifyReport> Verify(
      const storage::VerifyOptions& options) override;
  absl::StatusOr<storage::CompactReport> Compact() override;
  absl::StatusOr<storage::GcReport> CollectGarbage() override;
  // Every replica writes a checkpoint named `dir`; the report adds them up
  // and names the paths, comma-separated.
  absl::StatusOr<storage::BackupReport> Backup(const std::string& dir) override;

 private:
  explicit ShardedStateStore(std::vector<StoreShard> shards)
      : shards_(std::move(shards)) {}
  size_t OwnerOfKey(const storage::StateKey& key) const;
  // Shard indexes, the key's owner first.
  std::vector<size_t> ReadOrder(const storage::StateKey& key) const;

  std::vector<StoreShard> shards_;
  std::atomic<int64_t> recomputes_{0};
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_STORE_SHARDED_STATE_STORE_H_
