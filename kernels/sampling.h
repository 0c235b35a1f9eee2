// SampleRows: the next token of each of `rows` sequences from its logits,
// one rule per row, as one call, so that a device that computed the logits
// returns only the token ids.
//
// For row r with rule s (logits l = the row's first `vocab` values; NaN is
// treated as -inf and never picked):
//   greedy (s.temperature == 0, or no finite maximum): the lowest id among
//     the largest logits;
//   otherwise w_i = exp((l_i - max l) / T) in double, the candidates are the
//     ids with w_i > 0 ordered most likely first (larger w, then lower id);
//     top-k (s.top_k > 0) keeps the first k of them; top-p (s.top_p < 1)
//     then keeps the shortest such prefix whose mass reaches top_p of what
//     top-k kept; u = SamplingUniform(s.seed, s.draw) (sampling_uniform.h)
//     picks, walking the kept ids in ascending id order, the first id whose
//     running sum of w exceeds u times the kept mass.
// Temperature 0, top_k = 1 and a tiny top_p all pick the same token. A
// device twin may sum the weights in another order, so it can differ only
// where u or the top-p mass falls within rounding of a boundary.
//
// Layouts: logits [rows, row_stride] row-major (row_stride >= vocab),
// rules [rows], out [rows].
#ifndef TWICE_KERNELS_SAMPLING_H_
#define TWICE_KERNELS_SAMPLING_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::kernels {

struct SamplingRule {
  float temperature = 0.0f;  // >= 0, finite; 0 is greedy
  int32_t top_k = 0;         // >= 0; 0 keeps every candidate
  float top_p = 1.0f;        // in (0, 1]
  uint64_t seed = 0;
  uint64_t draw = 0;  // index of this token within its generation
};

// INVALID_ARGUMENT naming the first bad field.
[[nodiscard]] absl::Status ValidateSamplingRule(const SamplingRule& rule);

[[nodiscard]] absl::Status SampleRows(absl::Span<const float> logits,
                                      int64_t rows, int64_t row_stride,
                                      int64_t vocab,
                                      absl::Span<const SamplingRule> rules,
                                      absl::Span<int32_t> out);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_SAMPLING_H_
