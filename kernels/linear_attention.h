// Causal linear attention with a carried state (Based, Taylor features).
//
// Per head h, with featurized queries/keys phi_q, phi_k (width D), values v
// (width hd) and the state carried in from earlier tokens
//   S[h] : [hd, D]   S[h][e][m] = sum_t phi_k_t[m] · v_t[e]
//   z[h] : [D]       z[h][m]    = sum_t phi_k_t[m]
// every token t (in order) does
//   S[h] += v_t ⊗ phi_k_t ;  z[h] += phi_k_t          (update BEFORE reading)
//   y_t[e] = (sum_m phi_q_t[m] S[h][e][m]) / (phi_q_t · z[h] + eps).
//
// Layouts (row-major, contiguous):
//   phi_q, phi_k [T, H, D]; v, y [T, H, hd]; kv_state [H, hd, D]; k_state [H,
//   D]
// States are read and updated in place.
//
// LinearAttentionPrefill computes the same function in chunks of C tokens
// (C x C intra-chunk scores, never T x T):
//   num = Qc S^T + tril(Qc Kc^T) Vc,  den = Qc z + rowsum(tril(Qc Kc^T)),
//   then S += Vc^T Kc, z += colsum(Kc).  Work O(T · D · (hd + C)) per head.
// LinearAttentionStep is the recurrent form for one token (T = 1); it is the
// oracle the chunked form is tested against.
#ifndef TWICE_KERNELS_LINEAR_ATTENTION_H_
#define TWICE_KERNELS_LINEAR_ATTENTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::kernels {

struct LinearAttentionDims {
  int64_t heads = 0;         // H
  int64_t head_dim = 0;      // hd, width of a value vector
  int64_t feature_size = 0;  // D, width of a featurized query / key
};

[[nodiscard]] absl::Status LinearAttentionPrefill(
    absl::Span<const float> phi_q, absl::Span<const float> phi_k,
    absl::Span<const float> v, int64_t tokens, const LinearAttentionDims& dims,
    float eps, absl::Span<float> kv_state, absl::Span<float> k_state,
    absl::Span<float> y);

[[nodiscard]] absl::Status LinearAttentionStep(
    absl::Span<const float> phi_q, absl::Span<const float> phi_k,
    absl::Span<const float> v, const LinearAttentionDims& dims, float eps,
    absl::Span<float> kv_state, absl::Span<float> k_state, absl::Span<float> y);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_LINEAR_ATTENTION_H_
