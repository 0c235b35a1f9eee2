// OrchestratorService: the public Twice API. Tokenizes, plans segments and
// modes, and drives the prefill and decode services; reads and writes the
// document catalog through the StateStore. Holds no model state itself.
#ifndef TWICE_SERVICES_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_
#define TWICE_SERVICES_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "services/common/model_registry.h"
#include "services/orchestrator/internal_calls.h"
#include "services/orchestrator/prompt_templates.h"
#include "storage/state_store.h"
#include "twice/v1/decode.grpc.pb.h"
#include "twice/v1/orchestrator.grpc.pb.h"
#include "twice/v1/prefill.grpc.pb.h"

namespace twice::services {

struct OrchestratorLimits {
  // Largest document, in bytes of text or 4-byte token ids, one ingest may
  // carry. Default: 64 MiB.
  int64_t max_document_bytes = int64_t{64} << 20;
  // Largest document in tokens. Default: 4,194,304.
  int64_t max_document_tokens = int64_t{1} << 22;
  // Largest question in tokens. Default: 4096.
  int64_t max_question_tokens = 4096;
  // Most questions in one BatchAsk. Default: 64.
  int max_batch_questions = 64;
};

class OrchestratorService final : public v1::Orchestrator::Service {
 public:
  // `models` and `store` must outlive the service.
  OrchestratorService(const ModelRegistry* models, storage::StateStore* store,
                      OrchestratorLimits limits, PromptTemplates templates);

  // Binds the prefill and decode services. Until then, calls that need them
  // answer UNAVAILABLE. Call once.
  void BindInternalServices(std::shared_ptr<v1::Prefill::StubInterface> prefill,
                            std::shared_ptr<v1::Decode::StubInterface> decode);

  grpc::Status Ingest(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<v1::IngestResponse,
                                               v1::IngestRequest>* stream) override;
  grpc::Status Append(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<v1::IngestResponse,
                                               v1::AppendRequest>* stream) override;
  grpc::Status Ask(grpc::ServerContext* context, const v1::AskRequest* request,
                   grpc::ServerWriter<v1::AskResponse>* writer) override;
  grpc::Status BatchAsk(grpc::ServerContext* context,
                        const v1::BatchAskRequest* request,
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
  struct Question {
    std::vector<int32_t> tokens;
    std::string text;  // decoded text of the question tokens
    v1::AskMode mode = v1::ASK_MODE_DEFAULT;
    v1::SamplingOptions sampling;
  };
  using AskSink = std::function<bool(const v1::AskResponse&)>;

  // Answers one question over `record`, streaming through `sink`.
  absl::Status AnswerQuestion(grpc::ServerContext& context,
                              const storage::DocumentRecord& record,
                              const engine::Model& model,
                              const Question& question, const AskSink& sink);
  // Makes the document's final state available, recomputing missing segment
  // states from its tokens. Adds to `usage` what was reused or recomputed.
  absl::StatusOr<storage::StateKey> EnsureDocumentState(
      grpc::ServerContext& context, const storage::DocumentRecord& record,
      v1::Usage& usage);
  // Makes the document's prefix-encoded state (JRT models) available: the
  // recorded "prefix" mode state when stored, else recomputed from the
  // document's tokens (and recorded when the document had none). Adds to
  // `usage` what was reused or recomputed.
  absl::StatusOr<storage::StateKey> EnsurePrefixState(
      grpc::ServerContext& context, const storage::DocumentRecord& record,
      v1::Usage& usage);
  // Prefills `tokens` (a whole document) in prefix mode from the chain root
  // into ONE durable state: only the final state is recorded (mode_states),
  // so checkpoints would be states no document names. A stored state with
  // the same chain key is reused.
  absl::StatusOr<PrefillOutcome> PrefillPrefixState(
      grpc::ServerContext& context, const std::string& model,
      const std::string& tenant, absl::Span<const int32_t> tokens);
  // UNIMPLEMENTED naming the model, for prefix requests to a model without
  // a prefix encoder.
  static absl::Status NoPrefixEncoder(const std::string& model_name,
                                      const engine::Model& model);
  absl::StatusOr<storage::DocumentRecord> FindDocument(
      const grpc::ServerContext& context, const std::string& document_id);
  // The loaded model a document was read with; FAILED_PRECONDITION when it
  // is not served or its fingerprint changed.
  absl::StatusOr<const engine::Model*> ModelOfDocument(
      const storage::DocumentRecord& record) const;
  absl::StatusOr<Question> ParseQuestion(const engine::Model& model,
                                         const std::string& text,
                                         absl::Span<const int32_t> ids,
                                         v1::AskMode mode,
                                         const v1::SamplingOptions& sampling);
  grpc::Status CheckBound() const;
  absl::StatusOr<std::vector<int32_t>> Tokenize(const engine::Model& model,
                                                const std::string& text);

  const ModelRegistry* models_;
  storage::StateStore* store_;
  // Written once by BindInternalServices before `bound_` is released.
  std::shared_ptr<v1::Prefill::StubInterface> prefill_;
  std::shared_ptr<v1::Decode::StubInterface> decode_;
  std::atomic<bool> bound_{false};
  OrchestratorLimits limits_;
  PromptTemplates templates_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_
