#include "services/orchestrator/orchestrator_service.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/common/log.h"
#include "services/common/proto_convert.h"
#include "services/orchestrator/append_workflow.h"
#include "services/orchestrator/ask_workflows.h"
#include "services/orchestrator/document_ids.h"
#include "services/orchestrator/document_writes.h"
#include "services/orchestrator/ingest_workflow.h"

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
      templates_(std::move(templates)) {
  context_.models = models_;
  context_.store = store_;
  context_.limits = &limits_;
  context_.limiter = &limiter_;
  context_.locks = &locks_;
  context_.templates = &templates_;
}

void OrchestratorService::EnableRecordCache(int64_t capacity_bytes) {
  records_ = std::make_unique<RecordCache>(capacity_bytes);
  context_.records = records_.get();
}

void OrchestratorService::ForgetRecord(const std::string& tenant,
                                       const std::string& document_id) {
  if (records_ != nullptr) records_->Forget({tenant, document_id});
}

absl::Status OrchestratorService::LoadModelTemplates(const std::string& name,
                                                     const std::string& dir) {
  return templates_.LoadFor(name, dir);
}

void OrchestratorService::BindInternalServices(
    std::vector<Endpoint<v1::Prefill::StubInterface>> prefill,
    std::vector<Endpoint<v1::Decode::StubInterface>> decode) {
  prefill_ = std::make_unique<PrefillPool>(std::move(prefill));
  decode_ = std::make_unique<DecodePool>(std::move(decode));
  context_.prefill = prefill_.get();
  context_.decode = decode_.get();
  models_->SetDescriber(
      [this] { return CallDescribeModels(*prefill_, kDescribeTimeout); });
  bound_.store(true, std::memory_order_release);
}

absl::StatusOr<std::string> OrchestratorService::CallerTenant(
    const grpc::ServerContext& context) {
  absl::StatusOr<Caller> caller = AuthenticatePublic(auth_, context);
  if (!caller.ok()) return caller.status();
  return caller->tenant;
}

absl::StatusOr<OrchestratorService::Admitted> OrchestratorService::AdmitCall(
    const grpc::ServerContext& context) {
  absl::StatusOr<std::string> tenant = CallerTenant(context);
  if (!tenant.ok()) return tenant.status();
  absl::StatusOr<std::shared_ptr<void>> slot = limiter_.EnterCall(*tenant);
  if (!slot.ok()) return slot.status();
  if (!bound_.load(std::memory_order_acquire)) {
    return absl::UnavailableError("server is starting");
  }
  return Admitted{*std::move(tenant), *std::move(slot)};
}

absl::StatusOr<storage::DocumentRecord> OrchestratorService::FindDocument(
    const grpc::ServerContext& context, const std::string& document_id) {
  // Credentials first: an unauthenticated caller learns nothing, not even
  // whether an id is well formed.
  absl::StatusOr<std::string> tenant = CallerTenant(context);
  if (!tenant.ok()) return tenant.status();
  return FindDocumentOf(*store_, {*tenant, document_id});
}

grpc::Status OrchestratorService::Ingest(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::IngestResponse, v1::IngestRequest>* stream) {
  absl::StatusOr<Admitted> call = AdmitCall(*context);
  if (!call.ok()) return ToGrpcStatus(call.status());
  return IngestWorkflow(context_, call->tenant).Run(*context, *stream);
}

grpc::Status OrchestratorService::Append(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::IngestResponse, v1::AppendRequest>* stream) {
  absl::StatusOr<Admitted> call = AdmitCall(*context);
  if (!call.ok()) return ToGrpcStatus(call.status());
  return AppendWorkflow(context_, call->tenant).Run(*context, *stream);
}

grpc::Status OrchestratorService::Ask(
    grpc::ServerContext* context, const v1::AskRequest* request,
    grpc::ServerWriter<v1::AskResponse>* writer) {
  absl::StatusOr<Admitted> call = AdmitCall(*context);
  if (!call.ok()) return ToGrpcStatus(call.status());
  return AskWorkflow(context_, call->tenant).Run(*context, *request, *writer);
}

grpc::Status OrchestratorService::BatchAsk(
    grpc::ServerContext* context, const v1::BatchAskRequest* request,
    grpc::ServerWriter<v1::BatchAskResponse>* writer) {
  absl::StatusOr<Admitted> call = AdmitCall(*context);
  if (!call.ok()) return ToGrpcStatus(call.status());
  return BatchAskWorkflow(context_, call->tenant)
      .Run(*context, *request, *writer);
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
  ForgetRecord(record->tenant, record->document_id);
  absl::StatusOr<int64_t> deleted =
      store_->DeleteDocument(storage::RefOf(*record));
  if (!deleted.ok()) return ToGrpcStatus(deleted.status());
  response->set_states_deleted(*deleted);
  Log(LogLevel::kInfo, "document.deleted",
      absl::StrCat("doc=", record->document_id, " states=", *deleted));
  return grpc::Status::OK;
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
      absl::Status allowed = CheckPinAllowed(*store_, limits_, record->tenant,
                                             record->document_id);
      if (!allowed.ok()) return ToGrpcStatus(allowed);
    }
    record->pinned = request->pinned();
    updated = store_->UpdateDocument(*record);
  }
  if (record.ok()) ForgetRecord(record->tenant, record->document_id);
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
