// The rules a DocumentRecord must satisfy to be stored. Checked on every
// write (INVALID_ARGUMENT) and again on every decode, where a violation means
// the stored bytes are not a record this code wrote.
#ifndef TWICE_STORAGE_RECORD_VALIDATION_H_
#define TWICE_STORAGE_RECORD_VALIDATION_H_

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "storage/document_record.h"

namespace twice::storage {

// Longest string field a record may hold. Far above any id or model name;
// it exists so length prefixes stay 32-bit and a record stays small.
inline constexpr size_t kMaxRecordFieldBytes = 64 * 1024;

// INVALID_ARGUMENT unless `tenant` can name a key: non-empty, no NUL (NUL
// separates tenant from document id in keys), within kMaxRecordFieldBytes.
[[nodiscard]] absl::Status ValidateTenant(std::string_view tenant);
// INVALID_ARGUMENT unless `document_id` is non-empty and within bounds.
[[nodiscard]] absl::Status ValidateDocumentId(std::string_view document_id);

// INVALID_ARGUMENT unless: tenant and id are valid; counts are
// non-negative; segment end_tokens are strictly increasing, positive and at
// most token_count; mode names are non-empty and distinct; every string
// field is within kMaxRecordFieldBytes.
[[nodiscard]] absl::Status ValidateDocumentRecord(const DocumentRecord& record);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_RECORD_VALIDATION_H_
