#include "services/orchestrator/orchestrator_service.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "services/common/grpc_status.h"
#include "services/common/log.h"
#include "services/common/proto_convert.h"
#include "services/common/state_io.h"
#include "services/common/tenant.h"
#include "services/orchestrator/document_ids.h"
#include "services/orchestrator/internal_calls.h"

namespace twice::services {
namespace {

grpc::Status Invalid(std::string message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::move(message));
}

// Segment size when neither the request nor the model names one.
constexpr int64_t kFallbackSegmentTokens = 2048;

}  // namespace

OrchestratorService::OrchestratorService(const ModelRegistry* models,
                                         storage::StateStore* store,
                                         OrchestratorLimits limits,
                                         PromptTemplates templates)
    : models_(models),
      store_(store),
      limits_(limits),
      templates_(std::move(templates)) {}

void OrchestratorService::BindInternalServices(
    std::shared_ptr<v1::Prefill::StubInterface> prefill,
    std::shared_ptr<v1::Decode::StubInterface> decode) {
  prefill_ = std::move(prefill);
  decode_ = std::move(decode);
  bound_.store(true, std::memory_order_release);
}

grpc::Status OrchestratorService::CheckBound() const {
  if (bound_.load(std::memory_order_acquire)) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is starting");
}

absl::StatusOr<std::vector<int32_t>> OrchestratorService::Tokenize(
    const engine::Model& model, const std::string& text) {
  return model.tokenizer().Encode(text);
}

grpc::Status OrchestratorService::Ingest(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::IngestResponse, v1::IngestRequest>* stream) {
  const auto started = std::chrono::steady_clock::now();
  if (grpc::Status bound = CheckBound(); !bound.ok()) return bound;
  const std::string tenant = TenantOf(*context);
  v1::IngestRequest request;
  if (!stream->Read(&request) || !request.has_header()) {
    return Invalid("Ingest: the first message must carry the header");
  }
  const v1::IngestHeader header = request.header();
  absl::StatusOr<const engine::Model*> found = models_->Find(header.model());
  if (!found.ok()) return ToGrpcStatus(found.status());
  const engine::Model& model = **found;
  const std::string model_name = models_->Resolve(header.model());
  // A model with a prefix encoder always gets the prefix state too: ask
  // mode "prefix" is then as cheap as "default".
  const bool prepare_prefix = model.description().prefix_length > 0;
  if (header.prepare_prefix() && !prepare_prefix) {
    return ToGrpcStatus(NoPrefixEncoder(model_name, model));
  }
  if (header.segment_tokens() < 0) {
    return Invalid("segment_tokens must not be negative");
  }
  if (!header.document_id().empty()) {
    absl::Status valid = ValidateDocumentId(header.document_id());
    if (!valid.ok()) return ToGrpcStatus(valid);
  }

  // Collect the document; limits apply to what arrives, before tokenizing.
  std::string text;
  std::vector<int32_t> tokens;
  int64_t bytes = 0;
  do {
    bytes += static_cast<int64_t>(request.text().size()) +
             4 * static_cast<int64_t>(request.tokens_size());
    if (bytes > limits_.max_document_bytes) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("document exceeds the limit of ",
                                       limits_.max_document_bytes,
                                       " bytes (max_document_bytes)"));
    }
    text.append(request.text());
    tokens.insert(tokens.end(), request.tokens().begin(),
                  request.tokens().end());
  } while (stream->Read(&request));
  if (!text.empty() && !tokens.empty()) {
    return Invalid("send the document as text or as token ids, not both");
  }
  const bool from_text = !text.empty();
  if (from_text) {
    absl::StatusOr<std::vector<int32_t>> encoded = Tokenize(model, text);
    if (!encoded.ok()) return ToGrpcStatus(encoded.status());
    tokens = *std::move(encoded);
  }
  if (tokens.empty()) return Invalid("the document is empty");
  const int32_t vocab = model.description().vocab_size;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return Invalid(absl::StrCat("token id ", tokens[i], " at position ", i,
                                  " is outside the vocabulary [0, ", vocab,
                                  ")"));
    }
  }
  if (static_cast<int64_t>(tokens.size()) > limits_.max_document_tokens) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("document has ", tokens.size(),
                                     " tokens; the limit is ",
                                     limits_.max_document_tokens,
                                     " (max_document_tokens)"));
  }
  int64_t segment = header.segment_tokens();
  if (segment == 0) segment = model.description().training_context;
  if (segment <= 0) segment = kFallbackSegmentTokens;

  const std::string fingerprint = model.description().fingerprint;
  const std::string document_id =
      header.document_id().empty()
          ? DeriveDocumentId(fingerprint, tenant, tokens)
          : header.document_id();
  const int64_t total = static_cast<int64_t>(tokens.size());
  const int64_t segments_total = (total + segment - 1) / segment;

  absl::StatusOr<storage::DocumentRecord> existing =
      store_->GetDocument(tenant, document_id);
  int64_t created_ms = absl::ToUnixMillis(absl::Now());
  bool pinned = header.pin();
  if (existing.ok()) {
    absl::StatusOr<std::vector<int32_t>> stored_tokens =
        store_->GetTokens(tenant, document_id);
    if (!stored_tokens.ok()) return ToGrpcStatus(stored_tokens.status());
    if (*stored_tokens != tokens || existing->model_fingerprint != fingerprint) {
      return grpc::Status(
          grpc::StatusCode::ALREADY_EXISTS,
          absl::StrCat("document '", document_id,
                       "' exists with different content or model; delete it "
                       "first or choose another id"));
    }
    created_ms = existing->created_unix_ms;
    pinned = pinned || existing->pinned;
  } else if (existing.status().code() != absl::StatusCode::kNotFound) {
    return ToGrpcStatus(existing.status());
  }

  // Prefill segment by segment; segments already stored (a repeated or an
  // interrupted ingest, or a prefix shared with another document) are
  // reused by chain key, not recomputed.
  PrefillCall call;
  call.model = model_name;
  call.tenant = tenant;
  call.checkpoint_tokens = segment;
  int64_t segments_reused = 0;
  absl::StatusOr<PrefillOutcome> outcome = CallPrefill(
      *prefill_, *context, call, tokens, [&](const v1::PrefillResponse& r) {
        segments_reused += r.checkpoints_reused();
        if (r.done()) return;
        v1::IngestResponse progress;
        progress.set_document_id(document_id);
        progress.set_segments_done(
            (r.tokens_done() + segment - 1) / segment);
        progress.set_segments_total(segments_total);
        progress.set_tokens_done(r.tokens_done());
        progress.set_tokens_total(total);
        progress.set_tokens_per_second(r.tokens_per_second());
        progress.set_segments_reused(segments_reused);
        stream->Write(progress);
      });
  if (!outcome.ok()) return ToGrpcStatus(outcome.status());
  int64_t tokens_computed = outcome->tokens_computed;

  std::vector<std::pair<std::string, storage::StateKey>> mode_states;
  if (existing.ok()) mode_states = existing->mode_states;
  if (prepare_prefix) {
    absl::StatusOr<PrefillOutcome> prefix =
        PrefillPrefixState(*context, model_name, tenant, tokens);
    if (!prefix.ok()) return ToGrpcStatus(prefix.status());
    tokens_computed += prefix->tokens_computed;
    const std::string name(PrefillModeName(engine::PrefillMode::kPrefix));
    std::erase_if(mode_states,
                  [&](const auto& entry) { return entry.first == name; });
    mode_states.emplace_back(name, prefix->final_state);
  }

  storage::DocumentRecord record;
  record.tenant = tenant;
  record.document_id = document_id;
  record.model = model_name;
  record.model_fingerprint = fingerprint;
  record.text_sha256 = from_text ? TextSha256(text) : "";
  record.token_count = total;
  record.segment_tokens = segment;
  record.segments = outcome->checkpoints;
  record.mode_states = std::move(mode_states);
  record.pinned = pinned;
  record.created_unix_ms = created_ms;
  record.accessed_unix_ms = absl::ToUnixMillis(absl::Now());
  // The states the record names are durable (the prefill stored them before
  // answering), so the record may now point at them.
  absl::Status put = store_->PutDocument(record, tokens);
  if (!put.ok()) return ToGrpcStatus(put);

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  v1::IngestResponse done;
  done.set_document_id(document_id);
  done.set_segments_done(segments_total);
  done.set_segments_total(segments_total);
  done.set_tokens_done(total);
  done.set_tokens_total(total);
  done.set_tokens_per_second(
      seconds > 0 ? static_cast<double>(tokens_computed) / seconds : 0);
  done.set_segments_reused(segments_reused);
  *done.mutable_done() = ToDocumentInfo(record);
  stream->Write(done);
  Log(LogLevel::kInfo, "ingest.done",
      absl::StrCat("doc=", document_id, " tokens=", total,
                   " segments=", segments_total, " reused=", segments_reused,
                   " computed_tokens=", tokens_computed,
                   " prefix=", prepare_prefix));
  return grpc::Status::OK;
}

grpc::Status OrchestratorService::Append(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::IngestResponse, v1::AppendRequest>* stream) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      "Append arrives with issue 5 (orchestrator workflows); "
                      "re-ingest the longer document meanwhile: its shared "
                      "prefix segments are reused");
}

absl::StatusOr<storage::DocumentRecord> OrchestratorService::FindDocument(
    const grpc::ServerContext& context, const std::string& document_id) {
  absl::Status valid = ValidateDocumentId(document_id);
  if (!valid.ok()) return valid;
  absl::StatusOr<storage::DocumentRecord> record =
      store_->GetDocument(TenantOf(context), document_id);
  if (record.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(
        absl::StrCat("document '", document_id, "' not found"));
  }
  return record;
}

grpc::Status OrchestratorService::GetDocument(
    grpc::ServerContext* context, const v1::GetDocumentRequest* request,
    v1::DocumentInfo* response) {
  absl::StatusOr<storage::DocumentRecord> record =
      FindDocument(*context, request->document_id());
  if (!record.ok()) return ToGrpcStatus(record.status());
  *response = ToDocumentInfo(*record);
  return grpc::Status::OK;
}

grpc::Status OrchestratorService::ListDocuments(
    grpc::ServerContext* context, const v1::ListDocumentsRequest* request,
    v1::ListDocumentsResponse* response) {
  if (request->page_size() < 0 || request->page_size() > 1000) {
    return Invalid("page_size must be in [0, 1000]");
  }
  absl::StatusOr<storage::DocumentPage> page = store_->ListDocuments(
      TenantOf(*context), request->page_size(), request->page_token());
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (const storage::DocumentRecord& record : page->records) {
    *response->add_documents() = ToDocumentInfo(record);
  }
  response->set_next_page_token(page->next_page_token);
  return grpc::Status::OK;
}

grpc::Status OrchestratorService::DeleteDocument(
    grpc::ServerContext* context, const v1::DeleteDocumentRequest* request,
    v1::DeleteDocumentResponse* response) {
  absl::StatusOr<storage::DocumentRecord> record =
      FindDocument(*context, request->document_id());
  if (!record.ok()) return ToGrpcStatus(record.status());
  absl::StatusOr<int64_t> deleted =
      store_->DeleteDocument(record->tenant, record->document_id);
  if (!deleted.ok()) return ToGrpcStatus(deleted.status());
  response->set_states_deleted(*deleted);
  Log(LogLevel::kInfo, "document.deleted",
      absl::StrCat("doc=", record->document_id, " states=", *deleted));
  return grpc::Status::OK;
}

grpc::Status OrchestratorService::PinDocument(
    grpc::ServerContext* context, const v1::PinDocumentRequest* request,
    v1::DocumentInfo* response) {
  absl::StatusOr<storage::DocumentRecord> record =
      FindDocument(*context, request->document_id());
  if (!record.ok()) return ToGrpcStatus(record.status());
  record->pinned = request->pinned();
  absl::Status updated = store_->UpdateDocument(*record);
  if (!updated.ok()) return ToGrpcStatus(updated);
  *response = ToDocumentInfo(*record);
  return grpc::Status::OK;
}

grpc::Status OrchestratorService::ListModels(
    grpc::ServerContext* context, const v1::ListModelsRequest* request,
    v1::ListModelsResponse* response) {
  for (const std::string& name : models_->names()) {
    *response->add_models() = models_->Describe(name);
  }
  response->set_default_model(models_->default_name());
  return grpc::Status::OK;
}

}  // namespace twice::services
