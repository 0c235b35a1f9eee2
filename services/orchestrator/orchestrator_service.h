// OrchestratorService: the public Twice API. Authenticates and admits each
// call, then runs it as a workflow over the shared WorkflowContext:
// IngestWorkflow, AppendWorkflow (the write half), AskWorkflow and
// BatchAskWorkflow (the ask half, over QuestionAnswerer), with the stored
// states resolved by DocumentStates. The catalog calls (get, list, delete,
// pin, list models) are answered here. Holds no model state itself: it
// tokenizes with the models' tokenizers alone (ModelCards).
#ifndef TWICE_SERVICES_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_
#define TWICE_SERVICES_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "services/common/auth.h"
#include "services/orchestrator/document_locks.h"
#include "services/orchestrator/internal_calls.h"
#include "services/orchestrator/model_cards.h"
#include "services/orchestrator/orchestrator_limits.h"
#include "services/orchestrator/prompt_templates.h"
#include "services/orchestrator/record_cache.h"
#include "services/orchestrator/tenant_limiter.h"
#include "services/orchestrator/workflow_context.h"
#include "storage/store.h"
#include "twice/v1/decode.grpc.pb.h"
#include "twice/v1/orchestrator.grpc.pb.h"
#include "twice/v1/prefill.grpc.pb.h"

namespace twice::services {

class OrchestratorService final : public v1::Orchestrator::Service {
 public:
  // `models`, `store` and `auth` must outlive the service. `templates`
  // apply to every model that configures none of its own
  // (LoadModelTemplates). `auth` authenticates every call and names its
  // tenant; nullptr = every caller is tenant "default".
  OrchestratorService(ModelCards* models, storage::Store* store,
                      OrchestratorLimits limits, PromptTemplates templates,
                      Authenticator* auth = nullptr);

  // Keeps the records of asked documents, up to `capacity_bytes`, to start
  // asks before their record read returns (record_cache.h). For a store
  // across the network; call before serving.
  void EnableRecordCache(int64_t capacity_bytes);

  // Reads the prompt templates of model `name` from its directory's
  // config.json (prompt_templates.h). Call before serving.
  [[nodiscard]] absl::Status LoadModelTemplates(const std::string& name,
                                                const std::string& dir);

  // Binds the prefill and decode endpoints (one or more each; calls are
  // spread over them and retried elsewhere when one is unavailable). Until
  // then, calls that need them answer UNAVAILABLE. Call once.
  void BindInternalServices(
      std::vector<Endpoint<v1::Prefill::StubInterface>> prefill,
      std::vector<Endpoint<v1::Decode::StubInterface>> decode);

  grpc::Status Ingest(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::IngestResponse, v1::IngestRequest>* stream)
      override;
  grpc::Status Append(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::IngestResponse, v1::AppendRequest>* stream)
      override;
  grpc::Status Ask(grpc::ServerContext* context, const v1::AskRequest* request,
                   grpc::ServerWriter<v1::AskResponse>* writer) override;
  grpc::Status BatchAsk(
      grpc::ServerContext* context, const v1::BatchAskRequest* request,
      grpc::ServerWriter<v1::BatchAskResponse>* writer) override;
  grpc::Status GetDocument(grpc::ServerContext* context,
                           const v1::GetDocumentRequest* request,
                           v1::DocumentInfo* response) override;
  grpc::Status ListDocuments(grpc::ServerContext* context,
                             const v1::ListDocumentsRequest* request,
                             v1::ListDocumentsResponse* response) override;
  grpc::Status DeleteDocument(grpc::ServerContext* context,
                              const v1::DeleteDocumentRequest* request,
                              v1::DeleteDocumentResponse* response) override;
  grpc::Status PinDocument(grpc::ServerContext* context,
                           const v1::PinDocumentRequest* request,
                           v1::DocumentInfo* response) override;
  grpc::Status ListModels(grpc::ServerContext* context,
                          const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override;

 private:
  // The caller's tenant (auth.h); UNAUTHENTICATED without valid
  // credentials.
  absl::StatusOr<std::string> CallerTenant(const grpc::ServerContext& context);
  // A call the service takes on: the caller's tenant and its call slot
  // (TenantLimiter), held until `slot` goes.
  struct Admitted {
    std::string tenant;
    std::shared_ptr<void> slot;
  };
  // CallerTenant, then a call slot of that tenant; UNAVAILABLE until the
  // internal services are bound.
  absl::StatusOr<Admitted> AdmitCall(const grpc::ServerContext& context);
  // The caller's document `document_id`: another tenant's document answers
  // NOT_FOUND exactly like a missing one.
  absl::StatusOr<storage::DocumentRecord> FindDocument(
      const grpc::ServerContext& context, const std::string& document_id);
  // Drops a record this service is about to change from the record cache.
  void ForgetRecord(const std::string& tenant, const std::string& document_id);

  ModelCards* models_;
  storage::Store* store_;
  Authenticator* auth_;
  // Written once by BindInternalServices before `bound_` is released.
  std::unique_ptr<PrefillPool> prefill_;
  std::unique_ptr<DecodePool> decode_;
  std::atomic<bool> bound_{false};
  // Deadline of the prefill service's answer to which models it serves.
  static constexpr std::chrono::milliseconds kDescribeTimeout{10000};
  OrchestratorLimits limits_;
  TenantLimiter limiter_{limits_.tenants};
  // Filled before serving, then read-only.
  ModelPromptTemplates templates_;
  std::unique_ptr<RecordCache> records_;  // set by EnableRecordCache
  DocumentLocks locks_;
  // What every workflow works with; prefill and decode are filled in by
  // BindInternalServices.
  WorkflowContext context_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_
