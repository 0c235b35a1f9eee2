// DocumentStates: a stored document's states, made available on demand.
//
// Document tokens are the truth and states a cache: a state that was
// evicted, lost or found corrupt is recomputed from the tokens, starting
// from the latest stored boundary before it and following the record's
// boundaries exactly, so the recomputed chain keys are the recorded ones
// (checked). A document read by another version of its model is read again
// into the served version first (ModelOfDocument).
#ifndef TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_STATES_H_
#define TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_STATES_H_

#include <grpcpp/server_context.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "services/orchestrator/usage_tally.h"
#include "services/orchestrator/workflow_context.h"
#include "storage/document_record.h"
#include "storage/state_key.h"

namespace twice::services {

class DocumentStates {
 public:
  // `context` (and everything it points at) must outlive this object.
  explicit DocumentStates(const WorkflowContext& context) : context_(context) {}

  // The state after the whole document.
  absl::StatusOr<storage::StateKey> EnsureDocumentState(
      grpc::ServerContext& server, const storage::DocumentRecord& record,
      UsageTally& usage);
  // Makes the state at boundary `index` of the document available,
  // recomputing missing states from the tokens along the RECORDED
  // boundaries (after an Append they are not a uniform grid), and checks
  // that the recomputed key is the recorded one. Adds to `usage` what was
  // reused or recomputed.
  absl::StatusOr<storage::StateKey> EnsureBoundaryState(
      grpc::ServerContext& server, const storage::DocumentRecord& record,
      size_t index, UsageTally& usage);
  // Makes the document's prefix-encoded state (JRT models) available: the
  // recorded "prefix" mode state when stored, else recomputed from the
  // document's tokens (and recorded when the document had none). Adds to
  // `usage` what was reused or recomputed.
  absl::StatusOr<storage::StateKey> EnsurePrefixState(
      grpc::ServerContext& server, const storage::DocumentRecord& record,
      UsageTally& usage);
  // Prefills `tokens` (a whole document) in prefix mode from the chain root
  // into ONE durable state: only the final state is recorded (mode_states),
  // so checkpoints would be states no document names. A stored state with
  // the same chain key is reused.
  absl::StatusOr<PrefillOutcome> PrefillPrefixState(
      grpc::ServerContext& server, const std::string& model,
      const storage::DocumentRef& document, absl::Span<const int32_t> tokens);

  // The card of the model a document was read with. A document read by
  // another version of that model (same name, another fingerprint: an
  // upgrade) is first read again from its stored tokens into the served
  // version and `record` updated. FAILED_PRECONDITION when the model is not
  // served or the tokens do not fit the new version. `locked`: the caller
  // already holds the document's lock (DocumentLocks).
  absl::StatusOr<const ModelCard*> ModelOfDocument(
      grpc::ServerContext& server, storage::DocumentRecord& record,
      bool locked = false);

 private:
  // One recompute attempt of EnsureBoundaryState: resume from the latest
  // stored boundary before `index`, prefill along the recorded boundaries.
  absl::StatusOr<storage::StateKey> RecomputeBoundaryState(
      grpc::ServerContext& server, const storage::DocumentRecord& record,
      size_t index, const std::vector<int32_t>& all_tokens, UsageTally& usage);
  // Re-reads the tokens of `record` into `model` segment by segment (the
  // record's segment size), drops its states of the old version from the
  // record (they age out of the store; the prefix state is re-encoded when
  // a question needs it) and stores the updated record. Idempotent: a
  // record another call already upgraded is taken as it is.
  absl::Status UpgradeDocument(grpc::ServerContext& server,
                               const ModelCard& model,
                               storage::DocumentRecord& record, bool locked);

  const WorkflowContext& context_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_STATES_H_
