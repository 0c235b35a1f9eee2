// StoreService: the Store gRPC API over a local StateStore, so prefill and
// decode processes on other machines share one store (role `store`).
#ifndef TWICE_SERVICES_STORE_STORE_SERVICE_H_
#define TWICE_SERVICES_STORE_STORE_SERVICE_H_

#include <string>
#include <utility>

#include "services/common/auth.h"
#include "storage/store.h"
#include "twice/v1/store.grpc.pb.h"

namespace twice::services {

// Bytes per streamed chunk of a state blob: far below gRPC's 4 MiB limit.
inline constexpr int64_t kStateChunkBytes = 1 << 20;
// Token ids per streamed chunk.
inline constexpr int64_t kTokenChunk = 1 << 16;
// Largest state blob accepted over the wire.
inline constexpr int64_t kMaxStateBytes = int64_t{4} << 30;

// The wire form of the store's counters, both ways.
v1::StoreStats StoreStatsToProto(const storage::StoreStats& stats);
storage::StoreStats StoreStatsFromProto(const v1::StoreStats& proto);

class StoreService final : public v1::Store::Service {
 public:
  // `store` must outlive the service. Backup writes checkpoints under
  // `backup_dir` (created when missing); empty = Backup is refused
  // (FAILED_PRECONDITION).
  // `serve_data` = false makes every data RPC (states, blocks, records,
  // tokens) answer PERMISSION_DENIED whoever calls, leaving only the admin
  // RPCs: the Store that role all serves on its public listener.
  explicit StoreService(storage::Store* store, std::string backup_dir = "",
                        bool serve_data = true)
      : store_(store),
        backup_dir_(std::move(backup_dir)),
        serve_data_(serve_data) {}

  grpc::Status PutState(grpc::ServerContext* context,
                        grpc::ServerReader<v1::PutStateRequest>* reader,
                        v1::PutStateResponse* response) override;
  grpc::Status GetState(grpc::ServerContext* context,
                        const v1::GetStateRequest* request,
                        grpc::ServerWriter<v1::StateChunk>* writer) override;
  grpc::Status StatState(grpc::ServerContext* context,
                         const v1::StatStateRequest* request,
                         v1::StatStateResponse* response) override;
  grpc::Status DeleteState(grpc::ServerContext* context,
                           const v1::DeleteStateRequest* request,
                           v1::DeleteStateResponse* response) override;
  grpc::Status PutDocument(grpc::ServerContext* context,
                           grpc::ServerReader<v1::PutDocumentRequest>* reader,
                           v1::PutDocumentResponse* response) override;
  grpc::Status GetDocument(grpc::ServerContext* context,
                           const v1::GetDocumentRecordRequest* request,
                           v1::DocumentRecord* response) override;
  grpc::Status GetTokens(grpc::ServerContext* context,
                         const v1::GetTokensRequest* request,
                         grpc::ServerWriter<v1::TokenChunk>* writer) override;
  grpc::Status ListStates(grpc::ServerContext* context,
                          const v1::ListStatesRequest* request,
                          v1::ListStatesResponse* response) override;
  grpc::Status ListDocuments(
      grpc::ServerContext* context,
      const v1::ListDocumentRecordsRequest* request,
      v1::ListDocumentRecordsResponse* response) override;
  grpc::Status DeleteDocument(grpc::ServerContext* context,
                              const v1::DeleteDocumentRecordRequest* request,
                              v1::DeleteStateResponse* response) override;
  grpc::Status Stats(grpc::ServerContext* context,
                     const v1::StoreStatsRequest* request,
                     v1::StoreStats* response) override;
  grpc::Status PutStateBlocks(
      grpc::ServerContext* context,
      grpc::ServerReader<v1::PutStateBlocksRequest>* reader,
      v1::PutStateResponse* response) override;
  grpc::Status GetStateBlocks(
      grpc::ServerContext* context, const v1::GetStateRequest* request,
      grpc::ServerWriter<v1::StateChunk>* writer) override;
  grpc::Status Verify(grpc::ServerContext* context,
                      const v1::VerifyStoreRequest* request,
                      v1::VerifyStoreResponse* response) override;
  grpc::Status Compact(grpc::ServerContext* context,
                       const v1::CompactStoreRequest* request,
                       v1::CompactStoreResponse* response) override;
  grpc::Status Gc(grpc::ServerContext* context,
                  const v1::GcStoreRequest* request,
                  v1::GcStoreResponse* response) override;
  grpc::Status Backup(grpc::ServerContext* context,
                      const v1::BackupStoreRequest* request,
                      v1::BackupStoreResponse* response) override;

  // Authenticates every call (services/common/auth.h): internal peers
  // only, and for Stats, Verify, Compact, Gc and Backup also admin
  // tokens. nullptr (the default) = no checks. `auth` must outlive the
  // service; call before serving.
  void SetAuthenticator(Authenticator* auth) { auth_ = auth; }

 private:
  // The checks every data RPC starts with: served here at all, and called
  // by an internal peer.
  absl::Status AuthorizeData(const grpc::ServerContext& context) const;

  storage::Store* store_;
  Authenticator* auth_ = nullptr;
  std::string backup_dir_;
  bool serve_data_ = true;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_STORE_STORE_SERVICE_H_
