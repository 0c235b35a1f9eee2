#include "services/store/remote_state_store.h"

#include <grpcpp/client_context.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/common/proto_convert.h"
#include "services/common/request_id.h"
#include "services/store/store_service.h"

namespace twice::services {

RemoteStateStore::RemoteStateStore(std::shared_ptr<grpc::Channel> channel,
                                   std::chrono::milliseconds timeout)
    : stub_(v1::Store::NewStub(std::move(channel))), timeout_(timeout) {}

void RemoteStateStore::Prepare(grpc::ClientContext& context) const {
  context.set_deadline(std::chrono::system_clock::now() + timeout_);
  AttachRequestId(context);
}

absl::Status RemoteStateStore::PutState(
    const storage::StateKey& key, std::string_view blob,
    const storage::PutStateOptions& options) {
  grpc::ClientContext context;
  Prepare(context);
  v1::PutStateResponse response;
  auto writer = stub_->PutState(&context, &response);
  v1::PutStateRequest request;
  v1::PutStateHeader* header = request.mutable_header();
  *header->mutable_key() = ToProto(key);
  header->set_total_bytes(static_cast<int64_t>(blob.size()));
  header->set_recompute_tokens(options.recompute_tokens);
  header->set_flops_per_token(options.flops_per_token);
  header->set_tenant(options.tenant);
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
    const storage::StateKey& key) {
  grpc::ClientContext context;
  Prepare(context);
  v1::GetStateRequest request;
  *request.mutable_key() = ToProto(key);
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

absl::StatusOr<bool> RemoteStateStore::HasState(const storage::StateKey& key) {
  grpc::ClientContext context;
  Prepare(context);
  v1::StatStateRequest request;
  *request.mutable_key() = ToProto(key);
  v1::StatStateResponse response;
  absl::Status status =
      FromGrpcStatus(stub_->StatState(&context, request, &response));
  if (!status.ok()) return status;
  return response.exists();
}

absl::Status RemoteStateStore::Delete(const storage::StateKey& key,
                                      bool corrupt) {
  grpc::ClientContext context;
  Prepare(context);
  v1::DeleteStateRequest request;
  *request.mutable_key() = ToProto(key);
  request.set_corrupt(corrupt);
  v1::DeleteStateResponse response;
  return FromGrpcStatus(stub_->DeleteState(&context, request, &response));
}

absl::Status RemoteStateStore::DeleteState(const storage::StateKey& key) {
  return Delete(key, /*corrupt=*/false);
}

absl::Status RemoteStateStore::DiscardCorruptState(
    const storage::StateKey& key) {
  return Delete(key, /*corrupt=*/true);
}

absl::Status RemoteStateStore::PutStateBlocks(
    const storage::StateKey& key, const std::optional<storage::StateKey>& base,
    absl::Span<const std::string_view> new_blocks,
    const storage::PutStateOptions& options) {
  grpc::ClientContext context;
  Prepare(context);
  v1::PutStateResponse response;
  auto writer = stub_->PutStateBlocks(&context, &response);
  v1::PutStateBlocksRequest request;
  v1::PutStateBlocksHeader* header = request.mutable_header();
  *header->mutable_key() = ToProto(key);
  if (base.has_value()) *header->mutable_base() = ToProto(*base);
  for (std::string_view block : new_blocks) {
    header->add_block_bytes(static_cast<int64_t>(block.size()));
  }
  header->set_recompute_tokens(options.recompute_tokens);
  header->set_flops_per_token(options.flops_per_token);
  header->set_tenant(options.tenant);
  bool open = writer->Write(request);
  request.clear_header();
  // The blocks travel as one byte sequence in chunks of kStateChunkBytes.
  for (std::string_view block : new_blocks) {
    while (open && !block.empty()) {
      const size_t room = kStateChunkBytes - request.chunk().size();
      request.mutable_chunk()->append(block.substr(0, room));
      block.remove_prefix(std::min(room, block.size()));
      if (static_cast<int64_t>(request.chunk().size()) == kStateChunkBytes) {
        open = writer->Write(request);
        request.clear_chunk();
      }
    }
  }
  if (open && !request.chunk().empty()) writer->Write(request);
  writer->WritesDone();
  return FromGrpcStatus(writer->Finish());
}

absl::StatusOr<std::vector<std::string>> RemoteStateStore::GetStateBlocks(
    const storage::StateKey& key) {
  grpc::ClientContext context;
  Prepare(context);
  v1::GetStateRequest request;
  *request.mutable_key() = ToProto(key);
  auto reader = stub_->GetStateBlocks(&context, request);
  std::vector<int64_t> sizes;
  std::string bytes;
  v1::StateChunk chunk;
  bool first = true;
  while (reader->Read(&chunk)) {
    if (first) {
      sizes.assign(chunk.block_bytes().begin(), chunk.block_bytes().end());
      if (chunk.total_bytes() > 0) bytes.reserve(chunk.total_bytes());
      first = false;
    }
    bytes.append(chunk.chunk());
  }
  absl::Status status = FromGrpcStatus(reader->Finish());
  if (!status.ok()) return status;
  std::vector<std::string> blocks;
  size_t offset = 0;
  for (int64_t size : sizes) {
    if (size < 0 || offset + size > bytes.size()) {
      return absl::DataLossError(
          "GetStateBlocks: block sizes exceed the bytes");
    }
    blocks.push_back(bytes.substr(offset, size));
    offset += size;
  }
  if (offset != bytes.size()) {
    return absl::DataLossError("GetStateBlocks: bytes beyond the blocks");
  }
  return blocks;
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
  grpc::ClientContext context;
  Prepare(context);
  v1::PutDocumentResponse response;
  auto writer = stub_->PutDocument(&context, &response);
  v1::PutDocumentRequest request;
  *request.mutable_record() = ToProto(record);
  request.set_record_only(true);
  writer->Write(request);
  writer->WritesDone();
  return FromGrpcStatus(writer->Finish());
}

absl::StatusOr<storage::DocumentRecord> RemoteStateStore::GetDocument(
    const storage::DocumentRef& document) {
  const std::string_view tenant = document.tenant;
  const std::string_view document_id = document.document_id;
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
    const storage::DocumentRef& document) {
  const std::string_view tenant = document.tenant;
  const std::string_view document_id = document.document_id;
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

absl::StatusOr<storage::StatePage> RemoteStateStore::ListStates(
    int page_size, std::string_view page_token) {
  grpc::ClientContext context;
  Prepare(context);
  v1::ListStatesRequest request;
  request.set_page_size(page_size);
  request.set_page_token(std::string(page_token));
  v1::ListStatesResponse response;
  absl::Status status =
      FromGrpcStatus(stub_->ListStates(&context, request, &response));
  if (!status.ok()) return status;
  storage::StatePage page;
  for (const v1::StateListing& state : response.states()) {
    absl::StatusOr<storage::StateKey> key = FromProto(state.key());
    if (!key.ok()) {
      return absl::InternalError(absl::StrCat(
          "the store listed a malformed state key: ", key.status().message()));
    }
    page.states.push_back({.key = *key,
                           .stored_bytes = state.stored_bytes(),
                           .chunked = state.chunked(),
                           .tenant = state.tenant(),
                           .written_unix_ms = state.written_unix_ms()});
  }
  page.next_page_token = response.next_page_token();
  return page;
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
    const storage::DocumentRef& document) {
  const std::string_view tenant = document.tenant;
  const std::string_view document_id = document.document_id;
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
    stats = StoreStatsFromProto(response);
  }
  stats.recomputes += recomputes_.load();
  return stats;
}

absl::StatusOr<storage::VerifyReport> RemoteStateStore::Verify(
    const storage::VerifyOptions& options) {
  grpc::ClientContext context;
  Prepare(context);
  v1::VerifyStoreRequest request;
  request.set_repair(options.repair);
  v1::VerifyStoreResponse response;
  absl::Status status =
      FromGrpcStatus(stub_->Verify(&context, request, &response));
  if (!status.ok()) return status;
  storage::VerifyReport report;
  report.states_checked = response.states_checked();
  report.documents_checked = response.documents_checked();
  report.refs_checked = response.refs_checked();
  report.bytes_checked = response.bytes_checked();
  report.repaired = response.repaired();
  for (const v1::BadStoreValue& bad : response.bad()) {
    report.bad.push_back({bad.family(), bad.key(), bad.reason()});
  }
  return report;
}

absl::StatusOr<storage::CompactReport> RemoteStateStore::Compact() {
  grpc::ClientContext context;
  Prepare(context);
  v1::CompactStoreResponse response;
  absl::Status status = FromGrpcStatus(
      stub_->Compact(&context, v1::CompactStoreRequest(), &response));
  if (!status.ok()) return status;
  return storage::CompactReport{response.disk_bytes_before(),
                                response.disk_bytes_after()};
}

absl::StatusOr<storage::GcReport> RemoteStateStore::CollectGarbage() {
  grpc::ClientContext context;
  Prepare(context);
  v1::GcStoreResponse response;
  absl::Status status =
      FromGrpcStatus(stub_->Gc(&context, v1::GcStoreRequest(), &response));
  if (!status.ok()) return status;
  return storage::GcReport{response.orphan_refs(), response.orphan_blocks(),
                           response.disk_bytes_before(),
                           response.disk_bytes_after()};
}

absl::StatusOr<storage::BackupReport> RemoteStateStore::Backup(
    const std::string& dir) {
  grpc::ClientContext context;
  Prepare(context);
  v1::BackupStoreRequest request;
  request.set_name(dir);
  v1::BackupStoreResponse response;
  absl::Status status =
      FromGrpcStatus(stub_->Backup(&context, request, &response));
  if (!status.ok()) return status;
  return storage::BackupReport{response.path(), response.files(),
                               response.bytes(), response.document_count(),
                               response.state_count()};
}

}  // namespace twice::services
