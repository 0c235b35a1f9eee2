// RopeRotateHalf: rotary position embedding, GPT-NeoX "rotate-half" layout
// (not interleaved), applied in place over the full head dimension.
//
// x is viewed as [rows, heads, head_dim] with row stride `row_stride`
// (elements between consecutive rows, >= heads · head_dim, so q or k may be
// a column range of a fused qkv matrix). Row i sits at absolute position
// p = start_pos + i. With half = head_dim / 2 and, for i' in [0, half):
//   inv_freq[i'] = base^(-2 i' / head_dim),  angle = p · inv_freq[i'],
//   x1 = x[.., i'], x2 = x[.., half + i'],
//   x[.., i']        = x1 cos(angle) - x2 sin(angle)
//   x[.., half + i'] = x2 cos(angle) + x1 sin(angle).
// Angles are computed in double, so long positions keep their precision.
#ifndef TWICE_KERNELS_ROPE_H_
#define TWICE_KERNELS_ROPE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::kernels {

[[nodiscard]] absl::Status RopeRotateHalf(absl::Span<float> x, int64_t rows,
                                          int64_t row_stride, int64_t heads,
                                          int64_t head_dim, int64_t start_pos,
                                          float base);

// The same with row i at position positions[i] (one per row, >= 0): the
// rows of a batched decode step, each sequence at its own position.
[[nodiscard]] absl::Status RopeRotateHalfAt(absl::Span<float> x, int64_t rows,
                                            int64_t row_stride, int64_t heads,
                                            int64_t head_dim,
                                            absl::Span<const int64_t> positions,
                                            float base);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_ROPE_H_
