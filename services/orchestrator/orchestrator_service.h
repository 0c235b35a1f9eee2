// OrchestratorService: the public Twice API. Tokenizes, plans segments and
// modes, and drives the prefill and decode services; reads and writes the
// document catalog through the StateStore. Holds no model state itself.
//
// Source files: orchestrator_service.cc (binding, catalog calls),
// ingest_workflow.cc (Ingest, Append), document_state.cc (resolving and
// recomputing stored states), ask_calls.cc (Ask, BatchAsk) and
// ask_workflow.cc (each mode's recipe).
#ifndef TWICE_SERVICES_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_
#define TWICE_SERVICES_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "services/common/auth.h"
#include "services/orchestrator/internal_calls.h"
#include "services/orchestrator/model_cards.h"
#include "services/orchestrator/prompt_templates.h"
#include "services/orchestrator/tenant_limiter.h"
#include "services/orchestrator/usage_tally.h"
#include "storage/store.h"
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
  // Concurrency and ingest-rate limits by tenant (tenant_limiter.h).
  TenantLimits tenants;
  // Pinned documents one tenant may hold at once: pinned states are never
  // evicted, so without a bound one tenant could pin the whole state
  // budget. 0 = no limit. Default: 100.
  int64_t max_pinned_documents_per_tenant = 100;
  // Most segments (stored states) one document may have, which bounds the
  // state writes one ingest or append can cause. With segment_tokens 0 the
  // segment grows to fit; an explicit segment_tokens that needs more is
  // refused. Default: 4096.
  int64_t max_segments_per_document = 4096;
};

// Smallest non-zero segment_tokens an Ingest or Append accepts
// (IngestHeader.segment_tokens in orchestrator.proto).
inline constexpr int64_t kMinSegmentTokens = 16;

class OrchestratorService final : public v1::Orchestrator::Service {
 public:
  // `models`, `store` and `auth` must outlive the service. `templates`
  // apply to every model that configures none of its own
  // (LoadModelTemplates). `auth` authenticates every call and names its
  // tenant; nullptr = every caller is tenant "default".
  OrchestratorService(ModelCards* models, storage::Store* store,
                      OrchestratorLimits limits, PromptTemplates templates,
                      Authenticator* auth = nullptr);

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
  struct Question {
    std::vector<int32_t> tokens;
    std::string text;  // decoded text of the question tokens
    v1::AskMode mode = v1::ASK_MODE_DEFAULT;
    v1::SamplingOptions sampling;
    // Document tokens the answer reads: the whole document or as_of_tokens.
    int64_t document_tokens = 0;
  };
  // What the questions of one call share, resolved once before they run
  // (BatchAsk) or on demand (Ask). Read-only while questions run
  // concurrently. A cost (a recompute) is reported in the usage of the
  // first question that needs the resolved value.
  struct SharedInputs {
    std::shared_ptr<const std::vector<int32_t>> tokens;
    std::optional<storage::StateKey> document_state;
    UsageTally document_state_usage;
    size_t document_state_owner = 0;
    std::optional<storage::StateKey> prefix_state;
    UsageTally prefix_state_usage;
    size_t prefix_state_owner = 0;
    // Decode endpoint all questions go to, where they share one state load
    // and batched decode steps.
    std::optional<size_t> decode_endpoint;
  };
  using AskSink = std::function<bool(const v1::AskResponse&)>;

  // Answers one question (number `index` of the call) over `record`,
  // streaming through `sink`.
  absl::Status AnswerQuestion(grpc::ServerContext& context,
                              const storage::DocumentRecord& record,
                              const ModelCard& model, const Question& question,
                              size_t index, const SharedInputs& shared,
                              const AskSink& sink);
  // Resolves in `shared` what `questions` need: tokens, document state,
  // prefix state.
  absl::Status PrepareShared(grpc::ServerContext& context,
                             const storage::DocumentRecord& record,
                             const std::vector<Question>& questions,
                             SharedInputs& shared);
  // Makes the state at boundary `index` of the document available,
  // recomputing missing states from the tokens along the RECORDED
  // boundaries (after an Append they are not a uniform grid), and checks
  // that the recomputed key is the recorded one. Adds to `usage` what was
  // reused or recomputed.
  absl::StatusOr<storage::StateKey> EnsureBoundaryState(
      grpc::ServerContext& context, const storage::DocumentRecord& record,
      size_t index, UsageTally& usage);
  // One recompute attempt of EnsureBoundaryState: resume from the latest
  // stored boundary before `index`, prefill along the recorded boundaries.
  absl::StatusOr<storage::StateKey> RecomputeBoundaryState(
      grpc::ServerContext& context, const storage::DocumentRecord& record,
      size_t index, const std::vector<int32_t>& all_tokens, UsageTally& usage);
  // The state after the whole document.
  absl::StatusOr<storage::StateKey> EnsureDocumentState(
      grpc::ServerContext& context, const storage::DocumentRecord& record,
      UsageTally& usage);
  // Makes the document's prefix-encoded state (JRT models) available: the
  // recorded "prefix" mode state when stored, else recomputed from the
  // document's tokens (and recorded when the document had none). Adds to
  // `usage` what was reused or recomputed.
  absl::StatusOr<storage::StateKey> EnsurePrefixState(
      grpc::ServerContext& context, const storage::DocumentRecord& record,
      UsageTally& usage);
  // Prefills `tokens` (a whole document) in prefix mode from the chain root
  // into ONE durable state: only the final state is recorded (mode_states),
  // so checkpoints would be states no document names. A stored state with
  // the same chain key is reused.
  absl::StatusOr<PrefillOutcome> PrefillPrefixState(
      grpc::ServerContext& context, const std::string& model,
      const std::string& tenant, const std::string& document_id,
      absl::Span<const int32_t> tokens);
  // The caller's tenant (auth.h); UNAUTHENTICATED without valid
  // credentials.
  absl::StatusOr<std::string> CallerTenant(const grpc::ServerContext& context);
  // CallerTenant, then a call slot of that tenant (TenantLimiter), held
  // until the returned guard goes.
  absl::StatusOr<std::shared_ptr<void>> AdmitCall(
      const grpc::ServerContext& context);
  // The caller's document `document_id`: another tenant's document answers
  // NOT_FOUND exactly like a missing one.
  absl::StatusOr<storage::DocumentRecord> FindDocument(
      const grpc::ServerContext& context, const std::string& document_id);
  // The loaded model a document was read with. A document read by another
  // version of that model (same name, another fingerprint: an upgrade) is
  // first read again from its stored tokens into the served version and
  // `record` updated (UpgradeDocument). FAILED_PRECONDITION when the model
  // is not served or the tokens do not fit the new version. `locked`: the
  // caller already holds the document's LockDocument guard.
  absl::StatusOr<const ModelCard*> ModelOfDocument(
      grpc::ServerContext& context, storage::DocumentRecord& record,
      bool locked = false);
  // Re-reads the tokens of `record` into `model` segment by segment (the
  // record's segment size), drops its states of the old version from the
  // record (they age out of the store; the prefix state is re-encoded when
  // a question needs it) and stores the updated record. Idempotent: a
  // record another call already upgraded is taken as it is.
  absl::Status UpgradeDocument(grpc::ServerContext& context,
                               const ModelCard& model,
                               storage::DocumentRecord& record, bool locked);
  absl::StatusOr<Question> ParseQuestion(
      const ModelCard& model, const storage::DocumentRecord& record,
      const std::string& text, absl::Span<const int32_t> ids, v1::AskMode mode,
      const v1::SamplingOptions& sampling, int64_t as_of_tokens);
  grpc::Status CheckBound() const;
  // OK when `tenant` may pin one more document (document_id, not pinned
  // yet); RESOURCE_EXHAUSTED at max_pinned_documents_per_tenant.
  absl::Status CheckPinAllowed(const std::string& tenant,
                               const std::string& document_id);
  // The segment size of an ingest or append of `new_tokens` tokens onto a
  // document of `old_segments` segments: `requested` (already checked
  // against kMinSegmentTokens; 0 = `fallback`, grown to fit) checked
  // against max_segments_per_document.
  absl::StatusOr<int64_t> PlanSegment(int64_t requested, int64_t fallback,
                                      int64_t old_segments,
                                      int64_t new_tokens) const;
  // What one committed append wrote.
  struct Appended {
    storage::DocumentRecord record;  // as committed, at its new revision
    int64_t tokens_computed = 0;
    int64_t segments_reused = 0;
  };
  // One attempt of an Append of `appended` onto `record` as read: plans the
  // segments (and charges the tenant when `charge`), prefills from the
  // document's last state and commits the new record conditionally on the
  // revision read. ABORTED when another writer changed the document
  // meanwhile: the caller reads it again and retries.
  absl::StatusOr<Appended> AppendOnce(
      grpc::ServerContext& context, const storage::DocumentRecord& record,
      absl::Span<const int32_t> appended, int64_t requested_segment,
      bool charge,
      const std::function<void(const v1::IngestResponse&)>& progress);
  // Attempts of a catalog write that loses to another writer (ABORTED)
  // before the call gives up with that error. Every loss means another
  // write committed, so only a document under a sustained stream of
  // appends from several replicas runs out of them.
  static constexpr int kCommitAttempts = 10;
  // Deadline of the prefill service's answer to which models it serves.
  static constexpr std::chrono::milliseconds kDescribeTimeout{10000};
  absl::StatusOr<std::vector<int32_t>> Tokenize(const ModelCard& model,
                                                const std::string& text);
  const PromptTemplates& TemplatesFor(const std::string& model_name) const;
  // Serializes appends to one document in this process, so they queue
  // rather than conflict; across orchestrator replicas the catalog's
  // conditional writes (document_catalog.h) keep every append, and the one
  // that loses starts again (AppendOnce). Released by the returned guard.
  std::shared_ptr<void> LockDocument(const std::string& key);

  ModelCards* models_;
  storage::Store* store_;
  Authenticator* auth_;
  // Written once by BindInternalServices before `bound_` is released.
  std::unique_ptr<PrefillPool> prefill_;
  std::unique_ptr<DecodePool> decode_;
  std::atomic<bool> bound_{false};
  OrchestratorLimits limits_;
  TenantLimiter limiter_{limits_.tenants};
  PromptTemplates templates_;
  // By model name; filled before serving, then read-only.
  std::map<std::string, PromptTemplates> model_templates_;
  absl::Mutex locks_mu_;
  absl::CondVar lock_released_;
  std::set<std::string> locked_documents_ ABSL_GUARDED_BY(locks_mu_);
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_
