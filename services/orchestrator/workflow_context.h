// WorkflowContext: what the orchestrator's workflows (ingest, append, ask,
// batch ask) work with. The OrchestratorService owns every part and one
// context; a workflow is made per call over it.
#ifndef TWICE_SERVICES_ORCHESTRATOR_WORKFLOW_CONTEXT_H_
#define TWICE_SERVICES_ORCHESTRATOR_WORKFLOW_CONTEXT_H_

#include "services/orchestrator/document_locks.h"
#include "services/orchestrator/internal_calls.h"
#include "services/orchestrator/model_cards.h"
#include "services/orchestrator/orchestrator_limits.h"
#include "services/orchestrator/prompt_templates.h"
#include "services/orchestrator/record_cache.h"
#include "services/orchestrator/tenant_limiter.h"
#include "storage/store.h"

namespace twice::services {

struct WorkflowContext {
  ModelCards* models = nullptr;
  storage::Store* store = nullptr;
  // The internal services; set before the service answers any call that
  // needs them (OrchestratorService::BindInternalServices).
  PrefillPool* prefill = nullptr;
  DecodePool* decode = nullptr;
  const OrchestratorLimits* limits = nullptr;
  TenantLimiter* limiter = nullptr;
  DocumentLocks* locks = nullptr;
  const ModelPromptTemplates* templates = nullptr;
  // Records of asked documents, when the store is across the network;
  // nullptr = asks read their record first (record_cache.h).
  RecordCache* records = nullptr;
};

// Attempts of a catalog write that loses to another writer (ABORTED)
// before the call gives up with that error. Every loss means another
// write committed, so only a document under a sustained stream of
// appends from several replicas runs out of them.
inline constexpr int kCommitAttempts = 10;

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_WORKFLOW_CONTEXT_H_
