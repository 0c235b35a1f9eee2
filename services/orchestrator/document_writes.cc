#include "services/orchestrator/document_writes.h"

#include <algorithm>
#include <random>

namespace twice::services {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

absl::StatusOr<std::vector<int32_t>> DocumentTokens(const ModelCard& model,
                                                    Collected collected,
                                                    int64_t offset) {
  std::vector<int32_t> tokens = std::move(collected.tokens);
  if (!collected.text.empty()) {
    absl::StatusOr<std::vector<int32_t>> encoded =
        model.tokenizer().Encode(collected.text);
    if (!encoded.ok()) return encoded.status();
    tokens = *std::move(encoded);
  }
  if (absl::Status valid = model.CheckTokenIds(tokens, "document", offset);
      !valid.ok()) {
    return valid;
  }
  return tokens;
}

absl::Duration CommitBackoff(int attempt) {
  static thread_local std::mt19937 rng(std::random_device{}());
  const int64_t base_ms = int64_t{10} << std::min(attempt - 1, 6);
  std::uniform_int_distribution<int64_t> jitter(0, base_ms - 1);
  return absl::Milliseconds(base_ms + jitter(rng));
}

absl::Status ValidateSegmentTokens(int64_t segment_tokens) {
  if (segment_tokens == 0 || segment_tokens >= kMinSegmentTokens) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("segment_tokens must be 0 (the default) or at least ",
                   kMinSegmentTokens, ", got ", segment_tokens));
}

absl::StatusOr<int64_t> PlanSegment(const OrchestratorLimits& limits,
                                    int64_t requested, int64_t fallback,
                                    int64_t old_segments, int64_t new_tokens) {
  const int64_t room = limits.max_segments_per_document - old_segments;
  if (room <= 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the document has ", old_segments,
                     " segments, the limit "
                     "(max_segments_per_document)"));
  }
  // The smallest segment that keeps the document within its segments.
  const int64_t smallest = (new_tokens + room - 1) / room;
  if (requested == 0) return std::max(fallback, smallest);
  if (requested < smallest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment_tokens ", requested, " would make the document ",
        old_segments + (new_tokens + requested - 1) / requested,
        " segments; at most ", limits.max_segments_per_document,
        " are stored per document (max_segments_per_document): use at "
        "least ",
        smallest, " or 0"));
  }
  return requested;
}

absl::Status CheckPinAllowed(storage::DocumentCatalog& catalog,
                             const OrchestratorLimits& limits,
                             const std::string& tenant,
                             const std::string& document_id) {
  const int64_t limit = limits.max_pinned_documents_per_tenant;
  if (limit <= 0) return absl::OkStatus();
  int64_t pinned = 0;
  std::string page_token;
  do {
    absl::StatusOr<storage::DocumentPage> page =
        catalog.ListDocuments(tenant, 1000, page_token);
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

}  // namespace twice::services
