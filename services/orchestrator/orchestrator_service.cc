#include "services/orchestrator/orchestrator_service.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/common/log.h"
#include "services/common/proto_convert.h"
#include "services/orchestrator/document_ids.h"

namespace twice::services {
OrchestratorService::OrchestratorService(ModelCards* models,
                                         storage::Store* store,
                                         OrchestratorLimits limits,
                                         PromptTemplates templates,
                                         Authenticator* auth)
    : models_(models),
      store_(store),
      auth_(auth),
      limits_(limits),
      templates_(std::move(templates)) {}

absl::Status OrchestratorService::LoadModelTemplates(const std::string& name,
                                                     const std::string& dir) {
  absl::StatusOr<PromptTemplates> templates =
      LoadPromptTemplates(dir, templates_);
  if (!templates.ok()) return templates.status();
  model_templates_[name] = *std::move(templates);
  return absl::OkStatus();
}

const PromptTemplates& OrchestratorService::TemplatesFor(
    const std::string& model_name) const {
  auto it = model_templates_.find(model_name);
  return it != model_templates_.end() ? it->second : templates_;
}

void OrchestratorService::BindInternalServices(
    std::vector<Endpoint<v1::Prefill::StubInterface>> prefill,
    std::vector<Endpoint<v1::Decode::StubInterface>> decode) {
  prefill_ = std::make_unique<PrefillPool>(std::move(prefill));
  decode_ = std::make_unique<DecodePool>(std::move(decode));
  models_->SetDescriber(
      [this] { return CallDescribeModels(*prefill_, kDescribeTimeout); });
  bound_.store(true, std::memory_order_release);
}

std::shared_ptr<void> OrchestratorService::LockDocument(
    const std::string& key) {
  absl::MutexLock lock(&locks_mu_);
  while (locked_documents_.contains(key)) lock_released_.Wait(&locks_mu_);
  locked_documents_.insert(key);
  return std::shared_ptr<void>(nullptr, [this, key](void*) {
    absl::MutexLock unlock(&locks_mu_);
    locked_documents_.erase(key);
    lock_released_.SignalAll();
  });
}

grpc::Status OrchestratorService::CheckBound() const {
  if (bound_.load(std::memory_order_acquire)) return grpc::Status::OK;
  return ToGrpcStatus(absl::UnavailableError("server is starting"));
}

absl::StatusOr<std::vector<int32_t>> OrchestratorService::Tokenize(
    const ModelCard& model, const std::string& text) {
  return model.tokenizer().Encode(text);
}

absl::StatusOr<std::shared_ptr<void>> OrchestratorService::AdmitCall(
    const grpc::ServerContext& context) {
  absl::StatusOr<std::string> tenant = CallerTenant(context);
  if (!tenant.ok()) return tenant.status();
  return limiter_.EnterCall(*tenant);
}

absl::StatusOr<std::string> OrchestratorService::CallerTenant(
    const grpc::ServerContext& context) {
  absl::StatusOr<Caller> caller = AuthenticatePublic(auth_, context);
  if (!caller.ok()) return caller.status();
  return caller->tenant;
}

absl::StatusOr<storage::DocumentRecord> OrchestratorService::FindDocument(
    const grpc::ServerContext& context, const std::string& document_id) {
  // Credentials first: an unauthenticated caller learns nothing, not even
  // whether an id is well formed.
  absl::StatusOr<std::string> tenant = CallerTenant(context);
  if (!tenant.ok()) return tenant.status();
  absl::Status valid = ValidateDocumentId(document_id);
  if (!valid.ok()) return valid;
  // The store scopes records by tenant, so another tenant's id is simply
  // absent here.
  absl::StatusOr<storage::DocumentRecord> record =
      store_->GetDocument({*tenant, document_id});
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
  absl::StatusOr<std::string> tenant = CallerTenant(*context);
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  if (request->page_size() < 0 || request->page_size() > 1000) {
    return InvalidRequest("page_size must be in [0, 1000]");
  }
  absl::StatusOr<storage::DocumentPage> page = store_->ListDocuments(
      *tenant, request->page_size(), request->page_token());
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
      store_->DeleteDocument(storage::RefOf(*record));
  if (!deleted.ok()) return ToGrpcStatus(deleted.status());
  response->set_states_deleted(*deleted);
  Log(LogLevel::kInfo, "document.deleted",
      absl::StrCat("doc=", record->document_id, " states=", *deleted));
  return grpc::Status::OK;
}

absl::Status OrchestratorService::CheckPinAllowed(
    const std::string& tenant, const std::string& document_id) {
  const int64_t limit = limits_.max_pinned_documents_per_tenant;
  if (limit <= 0) return absl::OkStatus();
  int64_t pinned = 0;
  std::string page_token;
  do {
    absl::StatusOr<storage::DocumentPage> page =
        store_->ListDocuments(tenant, 1000, page_token);
    if (!page.ok()) return page.status();
    for (const storage::DocumentRecord& record : page->records) {
      if (record.pinned && record.document_id != document_id) ++pinned;
    }
    page_token = page->next_page_token;
  } while (!page_token.empty() && pinned < limit);
  if (pinned < limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "this tenant already has ", pinned,
      " pinned documents, the limit (max_pinned_documents_per_tenant); "
      "unpin one first"));
}

grpc::Status OrchestratorService::PinDocument(
    grpc::ServerContext* context, const v1::PinDocumentRequest* request,
    v1::DocumentInfo* response) {
  absl::Status updated = absl::AbortedError("not attempted");
  absl::StatusOr<storage::DocumentRecord> record;
  // The write is conditional on the record read; one that another writer
  // (an append through another replica) beat reads it again.
  for (int attempt = 0; attempt < kCommitAttempts && absl::IsAborted(updated);
       ++attempt) {
    record = FindDocument(*context, request->document_id());
    if (!record.ok()) return ToGrpcStatus(record.status());
    if (request->pinned() && !record->pinned) {
      absl::Status allowed =
          CheckPinAllowed(record->tenant, record->document_id);
      if (!allowed.ok()) return ToGrpcStatus(allowed);
    }
    record->pinned = request->pinned();
    updated = store_->UpdateDocument(*record);
  }
  if (!updated.ok()) return ToGrpcStatus(updated);
  record->revision += 1;
  *response = ToDocumentInfo(*record);
  return grpc::Status::OK;
}

grpc::Status OrchestratorService::ListModels(
    grpc::ServerContext* context, const v1::ListModelsRequest* request,
    v1::ListModelsResponse* response) {
  absl::StatusOr<std::string> tenant = CallerTenant(*context);
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  for (const std::string& name : models_->names()) {
    absl::StatusOr<const ModelCard*> card = models_->Find(name);
    if (!card.ok()) return ToGrpcStatus(card.status());
    *response->add_models() = (*card)->info();
  }
  response->set_default_model(models_->default_name());
  return grpc::Status::OK;
}

}  // namespace twice::services
