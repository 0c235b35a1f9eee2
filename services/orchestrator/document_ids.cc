#include "services/orchestrator/document_ids.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "storage/state_key.h"

namespace twice::services {

absl::Status ValidateDocumentId(std::string_view id) {
  if (id.empty() || id.size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        "document id must have 1 to 128 characters, got ", id.size()));
  }
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' &&
        c != '_' && c != ':' && c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("document id may hold only letters, digits and . _ : -"
                       "; got '",
                       absl::CHexEscape(std::string(id)), "'"));
    }
  }
  return absl::OkStatus();
}

std::string DeriveDocumentId(std::string_view fingerprint,
                             std::string_view tenant,
                             absl::Span<const int32_t> tokens) {
  // The chain hash already separates its inputs unambiguously.
  const storage::StateKey key = storage::ChainKey(
      storage::RootKey(fingerprint, "document-id", tenant), tokens);
  return absl::StrCat("doc-", key.Hex().substr(0, 24));
}

absl::StatusOr<storage::DocumentRecord> FindDocumentOf(
    storage::DocumentCatalog& catalog, const storage::DocumentRef& document) {
  absl::Status valid = ValidateDocumentId(document.document_id);
  if (!valid.ok()) return valid;
  absl::StatusOr<storage::DocumentRecord> record =
      catalog.GetDocument(document);
  if (absl::IsNotFound(record.status())) {
    return absl::NotFoundError(
        absl::StrCat("document '", document.document_id, "' not found"));
  }
  return record;
}

}  // namespace twice::services
