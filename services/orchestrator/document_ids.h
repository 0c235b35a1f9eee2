// Document ids: caller-chosen ones are validated; otherwise an id is derived
// from the content, so ingesting the same document twice is idempotent.
#ifndef TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_IDS_H_
#define TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_IDS_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "storage/document_catalog.h"

namespace twice::services {

// 1..128 characters of [A-Za-z0-9._:-]; INVALID_ARGUMENT otherwise.
[[nodiscard]] absl::Status ValidateDocumentId(std::string_view id);

// "doc-" + 24 hex digits of the chain hash of (fingerprint, tenant, tokens).
std::string DeriveDocumentId(std::string_view fingerprint,
                             std::string_view tenant,
                             absl::Span<const int32_t> tokens);

// The record of `document`, its id validated first. NOT_FOUND names the id
// only: the catalog scopes records by tenant, so another tenant's document
// answers exactly like a missing one.
[[nodiscard]] absl::StatusOr<storage::DocumentRecord> FindDocumentOf(
    storage::DocumentCatalog& catalog, const storage::DocumentRef& document);

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_IDS_H_
