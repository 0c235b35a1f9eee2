// What Ingest and Append share: collecting a streamed document within the
// size limits, turning it into checked token ids, planning its segments,
// the pin limit, and the pause between conditional commits.
#ifndef TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_WRITES_H_
#define TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_WRITES_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "services/orchestrator/model_cards.h"
#include "services/orchestrator/orchestrator_limits.h"
#include "storage/store.h"

namespace twice::services {

// Segment size when neither the request nor the model names one.
inline constexpr int64_t kFallbackSegmentTokens = 2048;

double SecondsSince(std::chrono::steady_clock::time_point start);

// The document text or token ids a stream carries, within the byte limit.
struct Collected {
  std::string text;
  std::vector<int32_t> tokens;
};

// `total_size`: what the first message announced (text bytes or token
// ids; 0 = nothing announced), checked against what arrived.
template <typename Request>
absl::StatusOr<Collected> Collect(
    Request& request, const std::function<bool(Request*)>& read_next,
    int64_t max_bytes, int64_t total_size) {
  Collected out;
  int64_t bytes = 0;
  do {
    bytes += static_cast<int64_t>(request.text().size()) +
             4 * static_cast<int64_t>(request.tokens_size());
    if (bytes > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("document exceeds the limit of ", max_bytes,
                       " bytes (max_document_bytes)"));
    }
    out.text.append(request.text());
    out.tokens.insert(out.tokens.end(), request.tokens().begin(),
                      request.tokens().end());
  } while (read_next(&request));
  if (!out.text.empty() && !out.tokens.empty()) {
    return absl::InvalidArgumentError(
        "send the document as text or as token ids, not both");
  }
  const int64_t received = out.text.empty()
                               ? static_cast<int64_t>(out.tokens.size())
                               : static_cast<int64_t>(out.text.size());
  if (total_size < 0) {
    return absl::InvalidArgumentError("total_size must not be negative");
  }
  if (total_size > 0 && received != total_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the stream carried ", received, " of the ", total_size,
        " bytes or token ids that total_size announced: a message was lost "
        "(is every text piece valid UTF-8?); nothing was stored"));
  }
  return out;
}

// Token ids from `collected` (text tokenized on its own), each checked
// against the vocabulary; positions in errors count from `offset`.
[[nodiscard]] absl::StatusOr<std::vector<int32_t>> DocumentTokens(
    const ModelCard& model, Collected collected, int64_t offset);

// Checked before the document is read, so a bad value costs nothing.
[[nodiscard]] absl::Status ValidateSegmentTokens(int64_t segment_tokens);

// The segment size of an ingest or append of `new_tokens` tokens onto a
// document of `old_segments` segments: `requested` (already checked
// against kMinSegmentTokens; 0 = `fallback`, grown to fit) checked
// against max_segments_per_document.
[[nodiscard]] absl::StatusOr<int64_t> PlanSegment(
    const OrchestratorLimits& limits, int64_t requested, int64_t fallback,
    int64_t old_segments, int64_t new_tokens);

// OK when `tenant` may pin one more document (document_id, not pinned
// yet); RESOURCE_EXHAUSTED at max_pinned_documents_per_tenant.
[[nodiscard]] absl::Status CheckPinAllowed(storage::DocumentCatalog& catalog,
                                           const OrchestratorLimits& limits,
                                           const std::string& tenant,
                                           const std::string& document_id);

// The pause before commit attempt `attempt` (1 = the first retry): random
// in [base, 2 base) with base 10 ms doubling per attempt, so two replicas
// that collided are unlikely to collide again.
absl::Duration CommitBackoff(int attempt);

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_WRITES_H_
