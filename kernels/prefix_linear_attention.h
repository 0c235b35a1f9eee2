// Prefix linear attention (JRT-RNN "PLA") prefill with a carried state.
//
// Per head h, with featurized decoder queries/keys phi_q, phi_k (width D) and
// values v (width hd) over the T tokens of the call, featurized encoder keys
// phi_ke and values ve over the first E tokens (the non-causal prefix), and
// the state carried in from earlier tokens
//   S[h] : [hd, D]   S[h][e][m] = sum_t phi_k_t[m] · v_t[e]
//   z[h] : [D]       z[h][m]    = sum_t phi_k_t[m]
// every query i of the call reads
//   num_i = S_in phi_q_i + sum_{j<=i} (phi_q_i · phi_k_j) v_j
//                        + sum_{j<E} (phi_q_i · phi_ke_j) ve_j
//   den_i = phi_q_i · (z_in + sum_{j<=i} phi_k_j + sum_{j<E} phi_ke_j)
//   y_i   = num_i · (1 / (den_i + eps))
// (JRT eq. 3: the encoder term is added to EVERY query, inside the prefix and
// after it), and the state leaves as the merge of JRT eq. 4
//   S = S_in + sum_{j<E} ve_j ⊗ phi_ke_j + sum_{j<T} v_j ⊗ phi_k_j,
//   z = z_in + sum_{j<E} phi_ke_j      + sum_{j<T} phi_k_j,
// after which decoding is plain Based decoding (LinearAttentionStep).
//
// Because the encoder term is the same for every query, it is folded into the
// state first and the causal part then runs from S_in + S_enc in chunks of C
// tokens (C x C intra-chunk scores, never T x T). The normaliser multiplies
// by the reciprocal as the published parallel form does (the recurrent step
// divides). E = 0 is an ordinary causal prefill.
//
// Layouts (row-major, contiguous):
//   phi_q, phi_k [T, H, D]; v, y [T, H, hd]; phi_ke [E, H, D]; ve [E, H, hd];
//   kv_state [H, hd, D]; k_state [H, D] (read and updated in place).
// Thread-safe for distinct states.
#ifndef TWICE_KERNELS_PREFIX_LINEAR_ATTENTION_H_
#define TWICE_KERNELS_PREFIX_LINEAR_ATTENTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/linear_attention.h"

namespace twice::kernels {

// INVALID_ARGUMENT when a span's size does not match the dimensions or E < 0.
[[nodiscard]] absl::Status PrefixLinearAttentionPrefill(
    absl::Span<const float> phi_q, absl::Span<const float> phi_k,
    absl::Span<const float> v, int64_t tokens,
    absl::Span<const float> phi_k_enc, absl::Span<const float> v_enc,
    int64_t encoder_tokens, const LinearAttentionDims& dims, float eps,
    absl::Span<float> kv_state, absl::Span<float> k_state, absl::Span<float> y);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_PREFIX_LINEAR_ATTENTION_H_
