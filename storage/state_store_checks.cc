#include "storage/state_store_checks.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "storage/record_validation.h"

namespace twice::storage {

absl::Status ValidatePutStateOptions(const PutStateOptions& options) {
  if (options.recompute_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("recompute_tokens must be non-negative, got ",
                     options.recompute_tokens));
  }
  if (!std::isfinite(options.flops_per_token) || options.flops_per_token < 0) {
    return absl::InvalidArgumentError(
        "flops_per_token must be finite and non-negative");
  }
  if (!options.tenant.empty()) return ValidateTenant(options.tenant);
  return absl::OkStatus();
}

absl::StatusOr<int> StatePageSize(int requested) {
  if (requested < 0 || requested > kMaxStatePageSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size must be in [0, ", kMaxStatePageSize, "], got ", requested));
  }
  return requested == 0 ? kMaxStatePageSize : requested;
}

}  // namespace twice::storage
