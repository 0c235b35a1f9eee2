#include "storage/document_catalog_checks.h"

#include "absl/strings/str_cat.h"
#include "storage/absl_view.h"
#include "storage/record_codec.h"
#include "storage/record_validation.h"

namespace twice::storage {

std::string DocumentName(std::string_view tenant,
                         std::string_view document_id) {
  return absl::StrCat("document ", AbslView(tenant), "/",
                      AbslView(document_id));
}

absl::Status CheckDocumentRef(std::string_view tenant,
                              std::string_view document_id) {
  if (absl::Status s = ValidateTenant(tenant); !s.ok()) return s;
  return ValidateDocumentId(document_id);
}

absl::StatusOr<int> DocumentPageSize(int requested) {
  if (requested < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size must be non-negative, got ", requested));
  }
  return requested == 0 ? kDefaultDocumentPageSize : requested;
}

absl::StatusOr<DocumentRecord> DecodeRecordFor(std::string_view stored,
                                               std::string_view tenant,
                                               std::string_view document_id) {
  absl::StatusOr<DocumentRecord> record = DecodeRecord(stored);
  if (!record.ok()) return record.status();
  if (absl::Status s = ValidateDocumentRecord(*record); !s.ok()) {
    return absl::DataLossError(s.message());
  }
  if (record->tenant != tenant || record->document_id != document_id) {
    return absl::DataLossError("record is stored under another document's key");
  }
  return record;
}

absl::Status StaleWriteError(const DocumentRecord& record, int64_t stored) {
  return absl::AbortedError(
      absl::StrCat(DocumentName(record.tenant, record.document_id),
                   stored == 0 ? " is not stored (deleted meanwhile?)"
                   : record.revision == 0 ? " already exists"
                                          : " was changed by another writer",
                   " (revision ", stored, ", the write was made from ",
                   record.revision, "); read it again"));
}

absl::Status CheckUnchangedTokenCount(const DocumentRecord& record,
                                      int64_t stored_token_count) {
  if (record.token_count == stored_token_count) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(DocumentName(record.tenant, record.document_id), " has ",
                   stored_token_count,
                   " tokens; UpdateDocument cannot change token_count to ",
                   record.token_count, " (use PutDocument)"));
}

absl::Status Annotate(const absl::Status& status, std::string_view what) {
  return absl::Status(status.code(),
                      absl::StrCat(AbslView(what), ": ", status.message()));
}

}  // namespace twice::storage
