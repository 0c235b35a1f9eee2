#include "services/store/store_service.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/common/proto_convert.h"

namespace twice::services {
absl::Status StoreService::AuthorizeData(
    const grpc::ServerContext& context) const {
  if (!serve_data_) {
    return absl::PermissionDeniedError(
        "the data RPCs of twice.v1.Store are internal and not served on this "
        "listener (role all serves them in process, or on --internal_listen "
        "to internal peers); call twice.v1.Orchestrator");
  }
  return AuthorizeInternal(auth_, context);
}

grpc::Status StoreService::PutState(
    grpc::ServerContext* context,
    grpc::ServerReader<v1::PutStateRequest>* reader,
    v1::PutStateResponse* response) {
  if (absl::Status auth = AuthorizeData(*context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  v1::PutStateRequest request;
  if (!reader->Read(&request) || !request.has_header()) {
    return InvalidRequest("PutState: the first message must carry the header");
  }
  const v1::PutStateHeader header = request.header();
  absl::StatusOr<storage::StateKey> key = FromProto(header.key());
  if (!key.ok()) return ToGrpcStatus(key.status());
  if (header.total_bytes() <= 0 || header.total_bytes() > kMaxStateBytes) {
    return InvalidRequest(absl::StrCat("PutState: total_bytes must be in [1, ",
                                       kMaxStateBytes, "], got ",
                                       header.total_bytes()));
  }
  std::string blob;
  blob.reserve(header.total_bytes());
  blob.append(request.chunk());
  while (reader->Read(&request)) {
    if (static_cast<int64_t>(blob.size() + request.chunk().size()) >
        header.total_bytes()) {
      return InvalidRequest("PutState: more bytes than total_bytes");
    }
    blob.append(request.chunk());
  }
  if (context->IsCancelled()) {
    return ToGrpcStatus(absl::CancelledError("PutState cancelled"));
  }
  if (static_cast<int64_t>(blob.size()) != header.total_bytes()) {
    return InvalidRequest(absl::StrCat("PutState: received ", blob.size(),
                                       " bytes, header said ",
                                       header.total_bytes()));
  }
  return ToGrpcStatus(
      store_->PutState(*key, blob,
                       {.recompute_tokens = header.recompute_tokens(),
                        .flops_per_token = header.flops_per_token(),
                        .tenant = header.tenant()}));
}

grpc::Status StoreService::GetState(
    grpc::ServerContext* context, const v1::GetStateRequest* request,
    grpc::ServerWriter<v1::StateChunk>* writer) {
  if (absl::Status auth = AuthorizeData(*context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  absl::StatusOr<storage::StateKey> key = FromProto(request->key());
  if (!key.ok()) return ToGrpcStatus(key.status());
  absl::StatusOr<std::string> blob = store_->GetState(*key);
  if (!blob.ok()) return ToGrpcStatus(blob.status());
  const int64_t total = static_cast<int64_t>(blob->size());
  for (int64_t offset = 0; offset < total; offset += kStateChunkBytes) {
    if (context->IsCancelled()) {
      return ToGrpcStatus(absl::CancelledError("GetState cancelled"));
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
  if (absl::Status auth = AuthorizeData(*context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  absl::StatusOr<storage::StateKey> key = FromProto(request->key());
  if (!key.ok()) return ToGrpcStatus(key.status());
  absl::StatusOr<bool> exists = store_->HasState(*key);
  if (!exists.ok()) return ToGrpcStatus(exists.status());
  response->set_exists(*exists);
  return grpc::Status::OK;
}

grpc::Status StoreService::DeleteState(grpc::ServerContext* context,
                                       const v1::DeleteStateRequest* request,
                                       v1::DeleteStateResponse* response) {
  if (absl::Status auth = AuthorizeData(*context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  absl::StatusOr<storage::StateKey> key = FromProto(request->key());
  if (!key.ok()) return ToGrpcStatus(key.status());
  absl::Status status = request->corrupt() ? store_->DiscardCorruptState(*key)
                                           : store_->DeleteState(*key);
  if (status.ok()) response->set_deleted(1);
  return ToGrpcStatus(status);
}

grpc::Status StoreService::PutDocument(
    grpc::ServerContext* context,
    grpc::ServerReader<v1::PutDocumentRequest>* reader,
    v1::PutDocumentResponse* response) {
  if (absl::Status auth = AuthorizeData(*context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  v1::PutDocumentRequest request;
  if (!reader->Read(&request) || !request.has_record()) {
    return InvalidRequest(
        "PutDocument: the first message must carry the record");
  }
  absl::StatusOr<storage::DocumentRecord> record = FromProto(request.record());
  if (!record.ok()) return ToGrpcStatus(record.status());
  if (request.record_only()) {
    if (request.tokens_size() > 0 || reader->Read(&request)) {
      return InvalidRequest(
          "PutDocument: a record_only write carries no tokens");
    }
    return ToGrpcStatus(store_->UpdateDocument(*record));
  }
  std::vector<int32_t> tokens(request.tokens().begin(), request.tokens().end());
  while (reader->Read(&request)) {
    if (static_cast<int64_t>(tokens.size() + request.tokens_size()) >
        record->token_count) {
      return InvalidRequest(
          "PutDocument: more tokens than the record's token count");
    }
    tokens.insert(tokens.end(), request.tokens().begin(),
                  request.tokens().end());
  }
  if (context->IsCancelled()) {
    return ToGrpcStatus(absl::CancelledError("PutDocument cancelled"));
  }
  return ToGrpcStatus(store_->PutDocument(*record, tokens));
}

grpc::Status StoreService::GetDocument(
    grpc::ServerContext* context, const v1::GetDocumentRecordRequest* request,
    v1::DocumentRecord* response) {
  if (absl::Status auth = AuthorizeData(*context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  absl::StatusOr<storage::DocumentRecord> record =
      store_->GetDocument({request->tenant(), request->document_id()});
  if (!record.ok()) return ToGrpcStatus(record.status());
  *response = ToProto(*record);
  return grpc::Status::OK;
}

grpc::Status StoreService::GetTokens(
    grpc::ServerContext* context, const v1::GetTokensRequest* request,
    grpc::ServerWriter<v1::TokenChunk>* writer) {
  if (absl::Status auth = AuthorizeData(*context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  absl::StatusOr<std::vector<int32_t>> tokens =
      store_->GetTokens({request->tenant(), request->document_id()});
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

grpc::Status StoreService::ListStates(grpc::ServerContext* context,
                                      const v1::ListStatesRequest* request,
                                      v1::ListStatesResponse* response) {
  if (absl::Status auth = AuthorizeData(*context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  absl::StatusOr<storage::StatePage> page =
      store_->ListStates(request->page_size(), request->page_token());
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (const storage::StateListing& state : page->states) {
    v1::StateListing* out = response->add_states();
    *out->mutable_key() = ToProto(state.key);
    out->set_stored_bytes(state.stored_bytes);
    out->set_chunked(state.chunked);
    out->set_tenant(state.tenant);
    out->set_written_unix_ms(state.written_unix_ms);
  }
  response->set_next_page_token(page->next_page_token);
  return grpc::Status::OK;
}

grpc::Status StoreService::ListDocuments(
    grpc::ServerContext* context, const v1::ListDocumentRecordsRequest* request,
    v1::ListDocumentRecordsResponse* response) {
  if (absl::Status auth = AuthorizeData(*context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
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
  if (absl::Status auth = AuthorizeData(*context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  absl::StatusOr<int64_t> deleted =
      store_->DeleteDocument({request->tenant(), request->document_id()});
  if (!deleted.ok()) return ToGrpcStatus(deleted.status());
  response->set_deleted(*deleted);
  return grpc::Status::OK;
}

grpc::Status StoreService::Stats(grpc::ServerContext* context,
                                 const v1::StoreStatsRequest* request,
                                 v1::StoreStats* response) {
  if (absl::Status auth = AuthorizeAdmin(auth_, *context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  *response = StoreStatsToProto(store_->Stats());
  return grpc::Status::OK;
}

grpc::Status StoreService::PutStateBlocks(
    grpc::ServerContext* context,
    grpc::ServerReader<v1::PutStateBlocksRequest>* reader,
    v1::PutStateResponse* response) {
  if (absl::Status auth = AuthorizeData(*context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  v1::PutStateBlocksRequest request;
  if (!reader->Read(&request) || !request.has_header()) {
    return InvalidRequest(
        "PutStateBlocks: the first message must carry the header");
  }
  const v1::PutStateBlocksHeader header = request.header();
  absl::StatusOr<storage::StateKey> key = FromProto(header.key());
  if (!key.ok()) return ToGrpcStatus(key.status());
  std::optional<storage::StateKey> base;
  if (header.has_base()) {
    absl::StatusOr<storage::StateKey> parsed = FromProto(header.base());
    if (!parsed.ok()) return ToGrpcStatus(parsed.status());
    base = *parsed;
  }
  int64_t total = 0;
  for (int64_t bytes : header.block_bytes()) {
    if (bytes < 0 || bytes > kMaxStateBytes - total) {
      return InvalidRequest(
          "PutStateBlocks: block sizes must be non-negative and "
          "add up to at most the largest state");
    }
    total += bytes;
  }
  std::string bytes;
  bytes.reserve(total);
  bytes.append(request.chunk());
  while (reader->Read(&request)) {
    if (static_cast<int64_t>(bytes.size() + request.chunk().size()) > total) {
      return InvalidRequest(
          "PutStateBlocks: more bytes than the blocks' sizes");
    }
    bytes.append(request.chunk());
  }
  if (context->IsCancelled()) {
    return ToGrpcStatus(absl::CancelledError("PutStateBlocks cancelled"));
  }
  if (static_cast<int64_t>(bytes.size()) != total) {
    return InvalidRequest(absl::StrCat("PutStateBlocks: received ",
                                       bytes.size(),
                                       " bytes, the blocks add up to ", total));
  }
  std::vector<std::string_view> blocks;
  size_t offset = 0;
  for (int64_t size : header.block_bytes()) {
    blocks.push_back(std::string_view(bytes).substr(offset, size));
    offset += size;
  }
  return ToGrpcStatus(
      store_->PutStateBlocks(*key, base, blocks,
                             {.recompute_tokens = header.recompute_tokens(),
                              .flops_per_token = header.flops_per_token(),
                              .tenant = header.tenant()}));
}

grpc::Status StoreService::GetStateBlocks(
    grpc::ServerContext* context, const v1::GetStateRequest* request,
    grpc::ServerWriter<v1::StateChunk>* writer) {
  if (absl::Status auth = AuthorizeData(*context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  absl::StatusOr<storage::StateKey> key = FromProto(request->key());
  if (!key.ok()) return ToGrpcStatus(key.status());
  absl::StatusOr<std::vector<std::string>> blocks =
      store_->GetStateBlocks(*key);
  if (!blocks.ok()) return ToGrpcStatus(blocks.status());
  v1::StateChunk first;
  int64_t total = 0;
  for (const std::string& block : *blocks) {
    first.add_block_bytes(static_cast<int64_t>(block.size()));
    total += static_cast<int64_t>(block.size());
  }
  first.set_total_bytes(total);
  if (!writer->Write(first)) return grpc::Status::OK;
  // Blocks are streamed as one byte sequence so a chunk never waits for a
  // small block to fill it.
  v1::StateChunk chunk;
  for (const std::string& block : *blocks) {
    std::string_view rest = block;
    while (!rest.empty()) {
      if (context->IsCancelled()) {
        return ToGrpcStatus(absl::CancelledError("GetStateBlocks cancelled"));
      }
      const size_t room = kStateChunkBytes - chunk.chunk().size();
      chunk.mutable_chunk()->append(rest.substr(0, room));
      rest.remove_prefix(std::min(room, rest.size()));
      if (static_cast<int64_t>(chunk.chunk().size()) == kStateChunkBytes) {
        if (!writer->Write(chunk)) return grpc::Status::OK;
        chunk.clear_chunk();
      }
    }
  }
  if (!chunk.chunk().empty()) writer->Write(chunk);
  return grpc::Status::OK;
}

grpc::Status StoreService::Verify(grpc::ServerContext* context,
                                  const v1::VerifyStoreRequest* request,
                                  v1::VerifyStoreResponse* response) {
  if (absl::Status auth = AuthorizeAdmin(auth_, *context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  absl::StatusOr<storage::VerifyReport> report =
      store_->Verify({.repair = request->repair()});
  if (!report.ok()) return ToGrpcStatus(report.status());
  response->set_states_checked(report->states_checked);
  response->set_documents_checked(report->documents_checked);
  response->set_refs_checked(report->refs_checked);
  response->set_bytes_checked(report->bytes_checked);
  response->set_repaired(report->repaired);
  for (const storage::BadValue& bad : report->bad) {
    v1::BadStoreValue* out = response->add_bad();
    out->set_family(bad.family);
    out->set_key(bad.key);
    out->set_reason(bad.reason);
  }
  return grpc::Status::OK;
}

grpc::Status StoreService::Compact(grpc::ServerContext* context,
                                   const v1::CompactStoreRequest* request,
                                   v1::CompactStoreResponse* response) {
  if (absl::Status auth = AuthorizeAdmin(auth_, *context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  absl::StatusOr<storage::CompactReport> report = store_->Compact();
  if (!report.ok()) return ToGrpcStatus(report.status());
  response->set_disk_bytes_before(report->disk_bytes_before);
  response->set_disk_bytes_after(report->disk_bytes_after);
  return grpc::Status::OK;
}

grpc::Status StoreService::Gc(grpc::ServerContext* context,
                              const v1::GcStoreRequest* request,
                              v1::GcStoreResponse* response) {
  if (absl::Status auth = AuthorizeAdmin(auth_, *context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  absl::StatusOr<storage::GcReport> report = store_->CollectGarbage();
  if (!report.ok()) return ToGrpcStatus(report.status());
  response->set_orphan_refs(report->orphan_refs);
  response->set_orphan_blocks(report->orphan_blocks);
  response->set_disk_bytes_before(report->disk_bytes_before);
  response->set_disk_bytes_after(report->disk_bytes_after);
  return grpc::Status::OK;
}

grpc::Status StoreService::Backup(grpc::ServerContext* context,
                                  const v1::BackupStoreRequest* request,
                                  v1::BackupStoreResponse* response) {
  if (absl::Status auth = AuthorizeAdmin(auth_, *context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  if (backup_dir_.empty()) {
    return ToGrpcStatus(absl::FailedPreconditionError(
        "Backup: this server has no backup directory"));
  }
  const std::string& name = request->name();
  if (name.empty() || name == "." || name == ".." ||
      name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return InvalidRequest("Backup: name must be one non-empty path component");
  }
  std::error_code ec;
  std::filesystem::create_directories(backup_dir_, ec);
  if (ec) {
    return ToGrpcStatus(absl::UnavailableError(
        absl::StrCat("Backup: create ", backup_dir_, ": ", ec.message())));
  }
  absl::StatusOr<storage::BackupReport> report =
      store_->Backup((std::filesystem::path(backup_dir_) / name).string());
  if (!report.ok()) return ToGrpcStatus(report.status());
  response->set_path(report->path);
  response->set_files(report->files);
  response->set_bytes(report->bytes);
  response->set_document_count(report->document_count);
  response->set_state_count(report->state_count);
  return grpc::Status::OK;
}

v1::StoreStats StoreStatsToProto(const storage::StoreStats& stats) {
  v1::StoreStats proto;
  proto.set_state_bytes(stats.state_bytes);
  proto.set_state_count(stats.state_count);
  proto.set_document_count(stats.document_count);
  proto.set_hits(stats.hits);
  proto.set_misses(stats.misses);
  proto.set_evictions(stats.evictions);
  proto.set_corruptions(stats.corruptions);
  proto.set_recomputes(stats.recomputes);
  proto.set_budget_bytes(stats.budget_bytes);
  proto.set_evicted_bytes(stats.evicted_bytes);
  proto.set_block_count(stats.block_count);
  proto.set_pinned_state_count(stats.pinned_state_count);
  proto.set_disk_bytes(stats.disk_bytes);
  proto.set_catalog_corruptions(stats.catalog_corruptions);
  return proto;
}

storage::StoreStats StoreStatsFromProto(const v1::StoreStats& proto) {
  storage::StoreStats stats;
  stats.state_bytes = proto.state_bytes();
  stats.state_count = proto.state_count();
  stats.document_count = proto.document_count();
  stats.hits = proto.hits();
  stats.misses = proto.misses();
  stats.evictions = proto.evictions();
  stats.corruptions = proto.corruptions();
  stats.recomputes = proto.recomputes();
  stats.budget_bytes = proto.budget_bytes();
  stats.evicted_bytes = proto.evicted_bytes();
  stats.block_count = proto.block_count();
  stats.pinned_state_count = proto.pinned_state_count();
  stats.disk_bytes = proto.disk_bytes();
  stats.catalog_corruptions = proto.catalog_corruptions();
  return stats;
}

}  // namespace twice::services
