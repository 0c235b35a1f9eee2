// What every DocumentCatalog implementation (RocksDB, RADOS) checks and
// names the same way, so a bad call or a bad stored record reads the same
// whichever store answers it.
#ifndef TWICE_STORAGE_DOCUMENT_CATALOG_CHECKS_H_
#define TWICE_STORAGE_DOCUMENT_CATALOG_CHECKS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/document_catalog.h"
#include "storage/document_record.h"

namespace twice::storage {

// Documents one ListDocuments page holds when the caller asks for 0.
inline constexpr int kDefaultDocumentPageSize = 100;

// "document <tenant>/<id>", the name errors and logs use.
std::string DocumentName(std::string_view tenant, std::string_view document_id);

// INVALID_ARGUMENT unless the tenant and id are valid (record_validation.h).
[[nodiscard]] absl::Status CheckDocumentRef(std::string_view tenant,
                                            std::string_view document_id);

// The page size a ListDocuments call asks for: kDefaultDocumentPageSize for
// 0; INVALID_ARGUMENT when negative.
[[nodiscard]] absl::StatusOr<int> DocumentPageSize(int requested);

// Decodes a stored record and checks it is one this code wrote for this
// document: DATA_LOSS when it does not decode, breaks the write rules
// (ValidateDocumentRecord) or names another document.
[[nodiscard]] absl::StatusOr<DocumentRecord> DecodeRecordFor(
    std::string_view stored, std::string_view tenant,
    std::string_view document_id);

// The ABORTED of a conditional write (document_catalog.h) made from
// revision `attempted` of a document stored at revision `stored`.
absl::Status StaleWriteError(const DocumentRecord& record, int64_t stored);

// INVALID_ARGUMENT unless UpdateDocument's `record` keeps the token count
// of the stored document (`stored_token_count`): only PutDocument changes
// tokens.
[[nodiscard]] absl::Status CheckUnchangedTokenCount(
    const DocumentRecord& record, int64_t stored_token_count);

// `status` with "<what>: " in front of its message.
absl::Status Annotate(const absl::Status& status, std::string_view what);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_DOCUMENT_CATALOG_CHECKS_H_
