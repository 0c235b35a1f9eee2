#include "kernels/check.h"

#include "absl/strings/str_cat.h"

namespace twice::kernels {

absl::Status CheckSize(absl::string_view op, absl::string_view what,
                       int64_t actual, int64_t expected) {
  if (actual == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": ", what, " has ", actual, " elements, expected ", expected));
}

absl::Status CheckAtLeast(absl::string_view op, absl::string_view what,
                          int64_t actual, int64_t expected) {
  if (actual >= expected) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", what, " has ", actual,
                   " elements, expected at least ", expected));
}

absl::Status CheckArg(bool ok, absl::string_view op, absl::string_view what) {
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what));
}

}  // namespace twice::kernels
