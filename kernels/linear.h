// Linear: y[m, n] = x[m, k] · W[n, k]^T (+ bias[n]).
//
// Layouts (row-major, contiguous): x [m, k], W [n, k] (PyTorch nn.Linear
// order, [out_features, in_features]), bias [n] or empty, y [m, n].
// x, bias and y are f32; W is a Tensor of F32, BF16, F16 or I8 (per-row
// scales, tensor.h) with shape [n, k], accumulated in f32. y is
// overwritten. INVALID_ARGUMENT when a size or W's shape does not match
// the dimensions; UNIMPLEMENTED naming the op, dtype and device for a W
// no kernel serves. Thread-safe: no shared mutable state.
#ifndef TWICE_KERNELS_LINEAR_H_
#define TWICE_KERNELS_LINEAR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/tensor.h"

namespace twice::kernels {

[[nodiscard]] absl::Status Linear(absl::Span<const float> x, int64_t m,
                                  int64_t k, const Tensor& weight, int64_t n,
                                  absl::Span<const float> bias,
                                  absl::Span<float> y);

// The same with f32 weights given as a span of n * k floats.
[[nodiscard]] absl::Status Linear(absl::Span<const float> x, int64_t m,
                                  int64_t k, absl::Span<const float> weight,
                                  int64_t n, absl::Span<const float> bias,
                                  absl::Span<float> y);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_LINEAR_H_
