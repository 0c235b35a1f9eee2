// RatChunkAttention: RAT's inter-chunk softmax attention (Wei et al. 2025,
// §2.4 step 7 of the fact sheet). Token t of chunk c at offset l attends,
// per head h, the final keys of the closed chunks c' < c plus its own
// running key, in ONE softmax:
//   keys   = {K_c'[h] : c' < n_t} ∪ {k̄_t[h]},  values likewise with V, v̄_t
//   s = scale · q_t[h] · key,  out_t[h] = sum softmax(s) · value
// Upstream computes the closed-chunk part with flex attention (output and
// log-sum-exp) and merges the own key with weights e^{λ-m}; a single
// softmax over the union is the same quantity, computed here directly.
//
// Layouts (row-major): q, own_k, own_v [T, H, hd] with row strides (they
// may be column ranges of one wider matrix); chunk_k, chunk_v [C, H, hd]
// rows with strides (post-RoPE, rotated by their chunk index; a state may
// keep k and v of one chunk side by side); visible [T] with
// 0 <= visible[t] <= C, the closed chunks token t sees; out [T, H, hd]
// contiguous.
// INVALID_ARGUMENT when a size does not match. Thread-safe.
#ifndef TWICE_KERNELS_RAT_CHUNK_ATTENTION_H_
#define TWICE_KERNELS_RAT_CHUNK_ATTENTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::kernels {

struct RatAttentionDims {
  int64_t tokens = 0;    // T
  int64_t chunks = 0;    // C, rows of chunk_k / chunk_v
  int64_t heads = 0;     // H
  int64_t head_dim = 0;  // hd
};

struct StridedRows {
  absl::Span<const float> data;
  int64_t stride = 0;  // elements between consecutive rows, >= H·hd
};

[[nodiscard]] absl::Status RatChunkAttention(
    StridedRows q, StridedRows own_k, StridedRows own_v, StridedRows chunk_k,
    StridedRows chunk_v, absl::Span<const int64_t> visible,
    const RatAttentionDims& dims, float scale, absl::Span<float> out);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_RAT_CHUNK_ATTENTION_H_
