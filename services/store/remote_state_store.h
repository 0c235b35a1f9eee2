// RemoteStateStore: the StateStore interface over the Store gRPC API, so a
// prefill, decode or orchestrator process uses a store in another process
// exactly as it would use an embedded one. Large values are streamed in
// chunks. Every call carries a deadline. Thread-safe (gRPC stubs are).
#ifndef TWICE_SERVICES_STORE_REMOTE_STATE_STORE_H_
#define TWICE_SERVICES_STORE_REMOTE_STATE_STORE_H_

#include <grpcpp/channel.h>

#include <atomic>
#include <chrono>
#include <memory>

#include "storage/store.h"
#include "twice/v1/store.grpc.pb.h"

namespace twice::services {

class RemoteStateStore final : public storage::Store {
 public:
  // `timeout` bounds every call (a state of a large model takes a while).
  RemoteStateStore(std::shared_ptr<grpc::Channel> channel,
                   std::chrono::milliseconds timeout);

  absl::Status PutState(const storage::StateKey& key, std::string_view blob,
                        const storage::PutStateOptions& options) override;
  absl::StatusOr<std::string> GetState(const storage::StateKey& key) override;
  absl::StatusOr<bool> HasState(const storage::StateKey& key) override;
  absl::Status DeleteState(const storage::StateKey& key) override;
  absl::Status DiscardCorruptState(const storage::StateKey& key) override;
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
  // `dir` is the checkpoint's name under the store server's --backup-dir.
  absl::StatusOr<storage::BackupReport> Backup(const std::string& dir) override;

 private:
  void Prepare(grpc::ClientContext& context) const;
  absl::Status Delete(const storage::StateKey& key, bool corrupt);
  absl::Status PutRecord(const storage::DocumentRecord& record,
                         absl::Span<const int32_t> tokens, bool record_only);

  std::unique_ptr<v1::Store::Stub> stub_;
  std::chrono::milliseconds timeout_;
  // Recomputes are counted where they happen; the remote store's counter
  // only sees its own process.
  std::atomic<int64_t> recomputes_{0};
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_STORE_REMOTE_STATE_STORE_H_
