// CausalGqaAttention: causal softmax attention with grouped-query heads over
// a context of `past` cached keys followed by the `tokens` new ones (the
// Llama full KV cache; used for prefill chunks and single-token decode).
//
// Query i (i in [0, T)) sits at context index P + i and attends every
// context index j in [0, P + i]. Query head h reads KV head h / (H / H_kv):
//   s_j = scale · q_i[h] · k_j[h / g],  p = softmax_j(s),
//   out_i[h] = sum_j p_j v_j[h / g],    g = H / H_kv
// with max subtraction; scores and sums in f32. Keys must already carry
// their rotary embedding. On the CPU this is PagedCausalAttention over a
// table of one block (kernels/paged_attention.h: the same loop, its e^-70
// weight cutoff and its threading).
//
// Layouts (row-major): q [T, H, hd] with row stride q_stride >= H·hd;
// k, v [P + T, H_kv, hd] contiguous in time order; out [T, H, hd]
// contiguous. INVALID_ARGUMENT when a size does not match. Thread-safe.
#ifndef TWICE_KERNELS_ATTENTION_DECODE_H_
#define TWICE_KERNELS_ATTENTION_DECODE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::kernels {

struct CausalAttentionDims {
  int64_t tokens = 0;    // T, new queries
  int64_t past = 0;      // P, cached keys before the first query
  int64_t heads = 0;     // H
  int64_t kv_heads = 0;  // H_kv, divides H
  int64_t head_dim = 0;  // hd
};

[[nodiscard]] absl::Status CausalGqaAttention(
    absl::Span<const float> q, int64_t q_stride, absl::Span<const float> k,
    absl::Span<const float> v, const CausalAttentionDims& dims, float scale,
    absl::Span<float> out);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_ATTENTION_DECODE_H_
