#include "services/store/remote_state_store.h"

#include <algorithm>
#include <string>

#include <grpcpp/client_context.h>

#include "services/common/grpc_status.h"
#include "services/common/proto_convert.h"
#include "services/store/store_service.h"

namespace twice::services {

RemoteStateStore::RemoteStateStore(std::shared_ptr<grpc::Channel> channel,
                                   std::chrono::milliseconds timeout)
    : stub_(v1::Store::NewStub(std::move(channel))), timeout_(timeout) {}

void RemoteStateStore::Prepare(grpc::ClientContext& context) const {
  context.set_deadline(std::chrono::system_clock::now() + timeout_);
}

absl::Status RemoteStateStore::PutState(const storage::StateKey& key,
                                        std::string_view blob,
                                        const storage::PutStateOptions& options) {
  grpc::ClientContext context;
  Prepare(context);
  v1::PutStateResponse response;
  auto writer = stub_->PutState(&context, &response);
  v1::PutStateRequest request;
  v1::PutStateHeader* header = request.mutable_header();
  *header->mutable_key() = ToProto(key);
  header->set_ephemeral(options.ephemeral);
  header->set_total_bytes(static_cast<int64_t>(blob.size()));
  header->set_recompute_tokens(options.recompute_tokens);
  for (size_t offset = 0; offset < blob.size() || offset == 0;
       offset += kStateChunkBytes) {
    request.set_chunk(std::string(blob.substr(offset, kStateChunkBytes)));
    if (!writer->Write(request)) break;
    request.clear_header();
    if (blob.empty()) break;
  }
  writer->WritesDone();
  return FromGrpcStatus(writer->Finish());
}

absl::StatusOr<std::string> RemoteStateStore::GetState(
    const storage::StateKey& key, bool ephemeral) {
  grpc::ClientContext context;
  Prepare(context);
  v1::GetStateRequest request;
  *request.mutable_key() = ToProto(key);
  request.set_ephemeral(ephemeral);
  auto reader = stub_->GetState(&context, request);
  std::string blob;
  v1::StateChunk chunk;
  while (reader->Read(&chunk)) {
    if (chunk.total_bytes() > 0) blob.reserve(chunk.total_bytes());
    blob.append(chunk.chunk());
  }
  absl::Status status = FromGrpcStatus(reader->Finish());
  if (!status.ok()) return status;
  return blob;
}

absl::StatusOr<bool> RemoteStateStore::HasState(const storage::StateKey& key,
                                                bool ephemeral) {
  grpc::ClientContext context;
  Prepare(context);
  v1::StatStateRequest request;
  *request.mutable_key() = ToProto(key);
  request.set_ephemeral(ephemeral);
  v1::StatStateResponse response;
  absl::Status status =
      FromGrpcStatus(stub_->StatState(&context, request, &response));
  if (!status.ok()) return status;
  return response.exists();
}

absl::Status RemoteStateStore::DeleteState(const storage::StateKey& key,
                                           bool ephemeral) {
  grpc::ClientContext context;
  Prepare(context);
  v1::DeleteStateRequest request;
  *request.mutable_key() = ToProto(key);
  request.set_ephemeral(ephemeral);
  v1::DeleteStateResponse response;
  return FromGrpcStatus(stub_->DeleteState(&context, request, &response));
}

absl::Status RemoteStateStore::PutDocument(
    const storage::DocumentRecord& record, absl::Span<const int32_t> tokens) {
  grpc::ClientContext context;
  Prepare(context);
  v1::PutDocumentResponse response;
  auto writer = stub_->PutDocument(&context, &response);
  v1::PutDocumentRequest request;
  *request.mutable_record() = ToProto(record);
  const int64_t total = static_cast<int64_t>(tokens.size());
  int64_t offset = 0;
  do {
    const int64_t end = std::min(total, offset + kTokenChunk);
    request.mutable_tokens()->Add(tokens.begin() + offset,
                                  tokens.begin() + end);
    if (!writer->Write(request)) break;
    request.Clear();
    offset = end;
  } while (offset < total);
  writer->WritesDone();
  return FromGrpcStatus(writer->Finish());
}

absl::Status RemoteStateStore::UpdateDocument(
    const storage::DocumentRecord& record) {
  // The Store API replaces a record together with its tokens so the two can
  // never disagree; an update re-sends the tokens it already holds.
  absl::StatusOr<std::vector<int32_t>> tokens =
      GetTokens(record.tenant, record.document_id);
  if (!tokens.ok()) return tokens.status();
  return PutDocument(record, *tokens);
}

absl::StatusOr<storage::DocumentRecord> RemoteStateStore::GetDocument(
    std::string_view tenant, std::string_view document_id) {
  grpc::ClientContext context;
  Prepare(context);
  v1::GetDocumentRecordRequest request;
  request.set_tenant(std::string(tenant));
  request.set_document_id(std::string(document_id));
  v1::DocumentRecord response;
  absl::Status status =
      FromGrpcStatus(stub_->GetDocument(&context, request, &response));
  if (!status.ok()) return status;
  return FromProto(response);
}

absl::StatusOr<std::vector<int32_t>> RemoteStateStore::GetTokens(
    std::string_view tenant, std::string_view document_id) {
  grpc::ClientContext context;
  Prepare(context);
  v1::GetTokensRequest request;
  request.set_tenant(std::string(tenant));
  request.set_document_id(std::string(document_id));
  auto reader = stub_->GetTokens(&context, request);
  std::vector<int32_t> tokens;
  v1::TokenChunk chunk;
  while (reader->Read(&chunk)) {
    tokens.insert(tokens.end(), chunk.tokens().begin(), chunk.tokens().end());
  }
  absl::Status status = FromGrpcStatus(reader->Finish());
  if (!status.ok()) return status;
  return tokens;
}

absl::StatusOr<storage::DocumentPage> RemoteStateStore::ListDocuments(
    std::string_view tenant, int page_size, std::string_view page_token) {
  grpc::ClientContext context;
  Prepare(context);
  v1::ListDocumentRecordsRequest request;
  request.set_tenant(std::string(tenant));
  request.set_page_size(page_size);
  request.set_page_token(std::string(page_token));
  v1::ListDocumentRecordsResponse response;
  absl::Status status =
      FromGrpcStatus(stub_->ListDocuments(&context, request, &response));
  if (!status.ok()) return status;
  storage::DocumentPage page;
  for (const v1::DocumentRecord& record : response.records()) {
    absl::StatusOr<storage::DocumentRecord> converted = FromProto(record);
    if (!converted.ok()) return converted.status();
    page.records.push_back(*std::move(converted));
  }
  page.next_page_token = response.next_page_token();
  return page;
}

absl::StatusOr<int64_t> RemoteStateStore::DeleteDocument(
    std::string_view tenant, std::string_view document_id) {
  grpc::ClientContext context;
  Prepare(context);
  v1::DeleteDocumentRecordRequest request;
  request.set_tenant(std::string(tenant));
  request.set_document_id(std::string(document_id));
  v1::DeleteStateResponse response;
  absl::Status status =
      FromGrpcStatus(stub_->DeleteDocument(&context, request, &response));
  if (!status.ok()) return status;
  return response.deleted();
}

void RemoteStateStore::RecordRecompute() { recomputes_.fetch_add(1); }

storage::StoreStats RemoteStateStore::Stats() {
  grpc::ClientContext context;
  Prepare(context);
  v1::StoreStats response;
  storage::StoreStats stats;
  if (stub_->Stats(&context, v1::StoreStatsRequest(), &response).ok()) {
    stats.state_bytes = response.state_bytes();
    stats.state_count = response.state_count();
    stats.document_count = response.document_count();
    stats.hits = response.hits();
    stats.misses = response.misses();
    stats.evictions = response.evictions();
    stats.corruptions = response.corruptions();
    stats.recomputes = response.recomputes();
  }
  stats.recomputes += recomputes_.load();
  return stats;
}

}  // namespace twice::services
