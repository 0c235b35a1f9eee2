#include "kernels/check.h"

#include <string>

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

absl::Status CheckShape(absl::string_view op, absl::string_view what,
                        const Shape& actual, const Shape& expected) {
  if (actual == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", what, " has shape ", ShapeToString(actual),
                   ", expected ", ShapeToString(expected)));
}

absl::Status UnsupportedTensor(absl::string_view op, absl::string_view what,
                               const Tensor& tensor) {
  return absl::UnimplementedError(
      absl::StrCat(op, ": no kernel for ", what, " of dtype ",
                   std::string(DTypeName(tensor.dtype())), " on ",
                   std::string(DeviceName(tensor.device()))));
}

absl::Status CheckArg(bool ok, absl::string_view op, absl::string_view what) {
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what));
}

}  // namespace twice::kernels
