// Linear: y[m, n] = x[m, k] · W[n, k]^T (+ bias[n]).
//
// Layouts (row-major, contiguous): x [m, k], W [n, k] (PyTorch nn.Linear
// order, [out_features, in_features]), bias [n] or empty, y [m, n].
// y is overwritten. Fails with INVALID_ARGUMENT when a span's size does not
// match the dimensions. Thread-safe: no shared mutable state.
#ifndef TWICE_KERNELS_LINEAR_H_
#define TWICE_KERNELS_LINEAR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::kernels {

[[nodiscard]] absl::Status Linear(absl::Span<const float> x, int64_t m,
                                  int64_t k, absl::Span<const float> weight,
                                  int64_t n, absl::Span<const float> bias,
                                  absl::Span<float> y);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_LINEAR_H_
