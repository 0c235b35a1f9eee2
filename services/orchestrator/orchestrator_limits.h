// The orchestrator's limits on what one call or one tenant may ask for.
#ifndef TWICE_SERVICES_ORCHESTRATOR_ORCHESTRATOR_LIMITS_H_
#define TWICE_SERVICES_ORCHESTRATOR_ORCHESTRATOR_LIMITS_H_

#include <cstdint>

#include "services/orchestrator/tenant_limiter.h"

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
}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_ORCHESTRATOR_LIMITS_H_
