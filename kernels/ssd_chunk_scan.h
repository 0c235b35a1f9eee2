// Mamba-2 state-space duality (SSD) scan: the chunked prefill form and the
// one-token recurrent step, with state passing.
//
// Per head h (H heads of P channels, G groups of N state dims, head h reads
// group g = h / (H / G)), with discretised inputs already formed by the
// caller (Δ_t = softplus(dt_t + dt_bias) > 0, A_h = -exp(A_log_h) < 0):
//   S_t = exp(Δ_t·A_h) · S_{t-1} + Δ_t · x_t ⊗ B_t        S [P, N]
//   y_t = S_t · C_t + D_h · x_t                             y [P]
// starting from the carried S (zero for a fresh sequence); on return S is
// the state after the last token, so calls over any split of a sequence
// give the same result.
//
// SsdChunkScan computes the same outputs in the chunked SSD form of
// "Transformers are SSMs" (Dao & Gu 2024, §6): the tokens are cut into
// chunks of Q (the last one may be shorter). With a_l = Δ_l·A_h and
// Acum[l] = Σ_{i<=l} a_i within a chunk, H_c the state entering chunk c:
//   Y_diag[l] = Σ_{s<=l} (C_l·B_s) exp(Acum[l] - Acum[s]) Δ_s x_s   (Q x Q)
//   Y_off[l]  = exp(Acum[l]) · H_c · C_l
//   H_{c+1}   = exp(Acum[Q-1]) H_c + Σ_s exp(Acum[Q-1] - Acum[s]) Δ_s x_s ⊗ B_s
//   y = Y_diag + Y_off + D·x
// It is exact (not an approximation) and equals T calls of SsdStep up to
// float summation order.
//
// Layouts (row-major, f32):
//   x   [T, H·P] row stride x_stride (channel h·P + p), e.g. a column range
//       of the conv output xBC
//   B,C [T, G·N] row stride bc_stride (group-major)
//   dt  [T, H]   Δ (after softplus), contiguous
//   a   [H]      A_h = -exp(A_log_h)
//   d   [H]      skip D_h
//   state [H, P, N] in/out
//   y   [T, H·P] contiguous, overwritten
// Thread safety: no shared mutable state; work is split over heads on the
// kernel pool.
#ifndef TWICE_KERNELS_SSD_CHUNK_SCAN_H_
#define TWICE_KERNELS_SSD_CHUNK_SCAN_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::kernels {

struct SsdShape {
  int64_t heads = 0;     // H
  int64_t head_dim = 0;  // P
  int64_t groups = 0;    // G, divides H
  int64_t state = 0;     // N
};

// Chunked form over `tokens` tokens with chunk length `chunk` (>= 1).
[[nodiscard]] absl::Status SsdChunkScan(
    const SsdShape& shape, int64_t tokens, int64_t chunk,
    absl::Span<const float> x, int64_t x_stride, absl::Span<const float> b,
    absl::Span<const float> c, int64_t bc_stride, absl::Span<const float> dt,
    absl::Span<const float> a, absl::Span<const float> d,
    absl::Span<float> state, absl::Span<float> y);

// Recurrent form for one token (x [H·P], b / c [G·N], dt [H], y [H·P]).
[[nodiscard]] absl::Status SsdStep(
    const SsdShape& shape, absl::Span<const float> x, absl::Span<const float> b,
    absl::Span<const float> c, absl::Span<const float> dt,
    absl::Span<const float> a, absl::Span<const float> d,
    absl::Span<float> state, absl::Span<float> y);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_SSD_CHUNK_SCAN_H_
