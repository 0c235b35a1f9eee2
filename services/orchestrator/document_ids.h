// Document ids: caller-chosen ones are validated; otherwise an id is derived
// from the content, so ingesting the same document twice is idempotent.
#ifndef TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_IDS_H_
#define TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_IDS_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::services {

// 1..128 characters of [A-Za-z0-9._:-]; INVALID_ARGUMENT otherwise.
[[nodiscard]] absl::Status ValidateDocumentId(std::string_view id);

// "doc-" + 24 hex digits of the chain hash of (fingerprint, tenant, tokens).
std::string DeriveDocumentId(std::string_view fingerprint,
                             std::string_view tenant,
                             absl::Span<const int32_t> tokens);

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_IDS_H_
