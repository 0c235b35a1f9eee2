#include "services/store/store_service.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/common/proto_convert.h"

namespace twice::services {
namespace {

grpc::Status Invalid(std::string_view message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(message));
}

}  // namespace

grpc::Status StoreService::PutState(
    grpc::ServerContext* context,
    grpc::ServerReader<v1::PutStateRequest>* reader,
    v1::PutStateResponse* response) {
  v1::PutStateRequest request;
  if (!reader->Read(&request) || !request.has_header()) {
    return Invalid("PutState: the first message must carry the header");
  }
  const v1::PutStateHeader header = request.header();
  absl::StatusOr<storage::StateKey> key = FromProto(header.key());
  if (!key.ok()) return ToGrpcStatus(key.status());
  if (header.total_bytes() <= 0 || header.total_bytes() > kMaxStateBytes) {
    return Invalid(absl::StrCat("PutState: total_bytes must be in [1, ",
                                kMaxStateBytes, "], got ",
                                header.total_bytes()));
  }
  std::string blob;
  blob.reserve(header.total_bytes());
  blob.append(request.chunk());
  while (reader->Read(&request)) {
    if (static_cast<int64_t>(blob.size() + request.chunk().size()) >
        header.total_bytes()) {
      return Invalid("PutState: more bytes than total_bytes");
    }
    blob.append(request.chunk());
  }
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "PutState cancelled");
  }
  if (static_cast<int64_t>(blob.size()) != header.total_bytes()) {
    return Invalid(absl::StrCat("PutState: received ", blob.size(),
                                " bytes, header said ", header.total_bytes()));
  }
  return ToGrpcStatus(store_->PutState(
      *key, blob, {header.ephemeral(), header.recompute_tokens()}));
}

grpc::Status StoreService::GetState(grpc::ServerContext* context,
                                    const v1::GetStateRequest* request,
                                    grpc::ServerWriter<v1::StateChunk>* writer) {
  absl::StatusOr<storage::StateKey> key = FromProto(request->key());
  if (!key.ok()) return ToGrpcStatus(key.status());
  absl::StatusOr<std::string> blob = store_->GetState(*key, request->ephemeral());
  if (!blob.ok()) return ToGrpcStatus(blob.status());
  const int64_t total = static_cast<int64_t>(blob->size());
  for (int64_t offset = 0; offset < total; offset += kStateChunkBytes) {
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "GetState cancelled");
    }
    v1::StateChunk chunk;
    chunk.set_chunk(blob->substr(offset, kStateChunkBytes));
    if (offset == 0) chunk.set_total_bytes(total);
    if (!writer->Write(chunk)) break;
  }
  return grpc::Status::OK;
}

grpc::Status StoreService::StatState(grpc::ServerContext* context,
                                     const v1::StatStateRequest* request,
                                     v1::StatStateResponse* response) {
  absl::StatusOr<storage::StateKey> key = FromProto(request->key());
  if (!key.ok()) return ToGrpcStatus(key.status());
  absl::StatusOr<bool> exists = store_->HasState(*key, request->ephemeral());
  if (!exists.ok()) return ToGrpcStatus(exists.status());
  response->set_exists(*exists);
  return grpc::Status::OK;
}

grpc::Status StoreService::DeleteState(grpc::ServerContext* context,
                                       const v1::DeleteStateRequest* request,
                                       v1::DeleteStateResponse* response) {
  absl::StatusOr<storage::StateKey> key = FromProto(request->key());
  if (!key.ok()) return ToGrpcStatus(key.status());
  absl::Status status = store_->DeleteState(*key, request->ephemeral());
  if (status.ok()) response->set_deleted(1);
  return ToGrpcStatus(status);
}

grpc::Status StoreService::PutDocument(
    grpc::ServerContext* context,
    grpc::ServerReader<v1::PutDocumentRequest>* reader,
    v1::PutDocumentResponse* response) {
  v1::PutDocumentRequest request;
  if (!reader->Read(&request) || !request.has_record()) {
    return Invalid("PutDocument: the first message must carry the record");
  }
  absl::StatusOr<storage::DocumentRecord> record = FromProto(request.record());
  if (!record.ok()) return ToGrpcStatus(record.status());
  std::vector<int32_t> tokens(request.tokens().begin(), request.tokens().end());
  while (reader->Read(&request)) {
    if (static_cast<int64_t>(tokens.size() + request.tokens_size()) >
        record->token_count) {
      return Invalid("PutDocument: more tokens than the record's token count");
    }
    tokens.insert(tokens.end(), request.tokens().begin(),
                  request.tokens().end());
  }
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "PutDocument cancelled");
  }
  return ToGrpcStatus(store_->PutDocument(*record, tokens));
}

grpc::Status StoreService::GetDocument(
    grpc::ServerContext* context, const v1::GetDocumentRecordRequest* request,
    v1::DocumentRecord* response) {
  absl::StatusOr<storage::DocumentRecord> record =
      store_->GetDocument(request->tenant(), request->document_id());
  if (!record.ok()) return ToGrpcStatus(record.status());
  *response = ToProto(*record);
  return grpc::Status::OK;
}

grpc::Status StoreService::GetTokens(grpc::ServerContext* context,
                                     const v1::GetTokensRequest* request,
                                     grpc::ServerWriter<v1::TokenChunk>* writer) {
  absl::StatusOr<std::vector<int32_t>> tokens =
      store_->GetTokens(request->tenant(), request->document_id());
  if (!tokens.ok()) return ToGrpcStatus(tokens.status());
  const int64_t total = static_cast<int64_t>(tokens->size());
  for (int64_t offset = 0; offset < total; offset += kTokenChunk) {
    v1::TokenChunk chunk;
    const int64_t end = std::min(total, offset + kTokenChunk);
    chunk.mutable_tokens()->Add(tokens->begin() + offset,
                                tokens->begin() + end);
    if (!writer->Write(chunk)) break;
  }
  return grpc::Status::OK;
}

grpc::Status StoreService::ListDocuments(
    grpc::ServerContext* context, const v1::ListDocumentRecordsRequest* request,
    v1::ListDocumentRecordsResponse* response) {
  absl::StatusOr<storage::DocumentPage> page = store_->ListDocuments(
      request->tenant(), request->page_size(), request->page_token());
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (const storage::DocumentRecord& record : page->records) {
    *response->add_records() = ToProto(record);
  }
  response->set_next_page_token(page->next_page_token);
  return grpc::Status::OK;
}

grpc::Status StoreService::DeleteDocument(
    grpc::ServerContext* context,
    const v1::DeleteDocumentRecordRequest* request,
    v1::DeleteStateResponse* response) {
  absl::StatusOr<int64_t> deleted =
      store_->DeleteDocument(request->tenant(), request->document_id());
  if (!deleted.ok()) return ToGrpcStatus(deleted.status());
  response->set_deleted(*deleted);
  return grpc::Status::OK;
}

grpc::Status StoreService::Stats(grpc::ServerContext* context,
                                 const v1::StoreStatsRequest* request,
                                 v1::StoreStats* response) {
  const storage::StoreStats stats = store_->Stats();
  response->set_state_bytes(stats.state_bytes);
  response->set_state_count(stats.state_count);
  response->set_document_count(stats.document_count);
  response->set_hits(stats.hits);
  response->set_misses(stats.misses);
  response->set_evictions(stats.evictions);
  response->set_corruptions(stats.corruptions);
  response->set_recomputes(stats.recomputes);
  return grpc::Status::OK;
}

}  // namespace twice::services
