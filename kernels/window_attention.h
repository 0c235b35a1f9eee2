// WindowAttention: causal sliding-window softmax attention over a context
// made of `past` cached keys followed by the `tokens` new ones.
//
// Query i (i in [0, T)) sits at context index P + i and attends context
// indices j in [max(0, P + i - window), P + i], i.e. up to `window` previous
// keys plus itself (Based: window = window_size / 2). Per head h:
//   s_j = scale · q_i[h] · k_j[h],  p = softmax(s),  out_i[h] = sum_j p_j
//   v_j[h]
// with the usual max subtraction. Keys must already carry their rotary
// embedding.
//
// Layouts (row-major): q [T, H, hd] with row stride q_stride >= H·hd (q may
// be a column range of a fused qkv matrix); k, v [P + T, H, hd] contiguous
// in time order; out [T, H, hd] contiguous.
#ifndef TWICE_KERNELS_WINDOW_ATTENTION_H_
#define TWICE_KERNELS_WINDOW_ATTENTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::kernels {

struct WindowAttentionDims {
  int64_t tokens = 0;    // T, new queries
  int64_t past = 0;      // P, cached keys before the first query
  int64_t heads = 0;     // H
  int64_t head_dim = 0;  // hd
  int64_t window = 0;    // previous keys a query may see, >= 0
};

[[nodiscard]] absl::Status WindowAttention(absl::Span<const float> q,
                                           int64_t q_stride,
                                           absl::Span<const float> k,
                                           absl::Span<const float> v,
                                           const WindowAttentionDims& dims,
                                           float scale, absl::Span<float> out);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_WINDOW_ATTENTION_H_
