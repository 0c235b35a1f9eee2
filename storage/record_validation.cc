#include "storage/record_validation.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "storage/absl_view.h"

namespace twice::storage {
namespace {

absl::Status CheckFieldSize(std::string_view name, std::string_view value) {
  if (value.size() > kMaxRecordFieldBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(name), " is ", value.size(),
                     " bytes; the limit is ", kMaxRecordFieldBytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTenant(std::string_view tenant) {
  if (tenant.empty()) return absl::InvalidArgumentError("tenant is empty");
  if (tenant.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("tenant contains a NUL byte");
  }
  return CheckFieldSize("tenant", tenant);
}

absl::Status ValidateDocumentId(std::string_view document_id) {
  if (document_id.empty()) {
    return absl::InvalidArgumentError("document id is empty");
  }
  return CheckFieldSize("document id", document_id);
}

absl::Status ValidateDocumentRecord(const DocumentRecord& record) {
  if (absl::Status s = ValidateTenant(record.tenant); !s.ok()) return s;
  if (absl::Status s = ValidateDocumentId(record.document_id); !s.ok()) {
    return s;
  }
  for (auto [name, value] :
       {std::pair<std::string_view, std::string_view>{"model", record.model},
        {"model_fingerprint", record.model_fingerprint},
        {"text_sha256", record.text_sha256}}) {
    if (absl::Status s = CheckFieldSize(name, value); !s.ok()) return s;
  }
  if (record.revision < 0) {
    return absl::InvalidArgumentError("revision must be non-negative");
  }
  if (record.token_count < 0 || record.segment_tokens < 0) {
    return absl::InvalidArgumentError(
        "token_count and segment_tokens must be non-negative");
  }
  int64_t previous_end = 0;
  for (size_t i = 0; i < record.segments.size(); ++i) {
    const int64_t end = record.segments[i].end_token;
    if (end <= previous_end) {
      return absl::InvalidArgumentError(absl::StrCat(
          "segment ", i, " ends at token ", end,
          "; boundaries must be positive and strictly increasing"));
    }
    if (end > record.token_count) {
      return absl::InvalidArgumentError(
          absl::StrCat("segment ", i, " ends at token ", end,
                       ", past token_count ", record.token_count));
    }
    previous_end = end;
  }
  std::set<std::string_view> modes;
  for (const auto& [mode, key] : record.mode_states) {
    if (mode.empty()) {
      return absl::InvalidArgumentError("mode state with an empty mode name");
    }
    if (absl::Status s = CheckFieldSize("mode name", mode); !s.ok()) return s;
    if (!modes.insert(mode).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("mode \"", mode, "\" is named twice"));
    }
  }
  return absl::OkStatus();
}

}  // namespace twice::storage
