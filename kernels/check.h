// Argument checks shared by the kernel entry points. Every entry point
// validates the sizes of its spans against the dimensions it is given before
// dispatching, so an implementation may index without bounds checks.
#ifndef TWICE_KERNELS_CHECK_H_
#define TWICE_KERNELS_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kernels/tensor.h"

namespace twice::kernels {

// Elements a row-major [rows, cols] matrix with row stride `stride` spans:
// (rows - 1) * stride + cols, or 0 when it has no rows.
inline int64_t StridedExtent(int64_t rows, int64_t cols, int64_t stride) {
  return rows == 0 ? 0 : (rows - 1) * stride + cols;
}

// INVALID_ARGUMENT "<op>: <what> has <actual> elements, expected <expected>"
// unless actual == expected.
[[nodiscard]] absl::Status CheckSize(absl::string_view op,
                                     absl::string_view what, int64_t actual,
                                     int64_t expected);
// Like CheckSize but only requires actual >= expected (strided views).
[[nodiscard]] absl::Status CheckAtLeast(absl::string_view op,
                                        absl::string_view what, int64_t actual,
                                        int64_t expected);
// INVALID_ARGUMENT "<op>: <what> has shape [..], expected [..]" unless
// the shapes are equal.
[[nodiscard]] absl::Status CheckShape(absl::string_view op,
                                      absl::string_view what,
                                      const Shape& actual,
                                      const Shape& expected);
// UNIMPLEMENTED "<op>: no kernel for <what> of dtype <D> on <device>": the
// answer for a tensor no implementation serves (never a silent copy or
// conversion).
[[nodiscard]] absl::Status UnsupportedTensor(absl::string_view op,
                                             absl::string_view what,
                                             const Tensor& tensor);
// INVALID_ARGUMENT "<op>: <what>" unless `ok`.
[[nodiscard]] absl::Status CheckArg(bool ok, absl::string_view op,
                                    absl::string_view what);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_CHECK_H_
