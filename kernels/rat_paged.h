// A RAT layer (engine/layers/rat_attention.h) between its two projections,
// for the rows of one pass of a resident executor: the running (open-chunk)
// state of each sequence lives in a slot of one array, and its closed
// chunks' keys and values in a paged pool (kernels/paged_attention.h's
// blocks, one row per closed chunk), so the chunk-level KV grows by blocks.
//
// Rows (PagedRows): a prefill pass is `rows` consecutive tokens of one
// sequence from position `start` (slot slots[0], block table row 0); a
// step is one token per row at positions[r] (slot slots[r], table row r).
//
// RatChunkScan, per row in order (a prefill pass is a recurrence over its
// tokens), per channel j of D, with t = p mod L and c = p / L:
//   g = σ(g̃_j + bias_j),  k = k̃[j mod G·hd],  v = v_j
//   k̄ = (1 − g) k if t = 0, else g k̄ + (1 − g) k;  v̄ likewise
//   q = q̃[j mod G·hd],  z = σ(z̃_j)
// from proj rows [z̃ | v | g̃ | q̃ | k̃] (width 3D + 2·G·hd, row stride
// proj_stride); then q and k̄ are rotated (rotate-half, position c, base
// rope_base) into q_out and k_out [rows, D], v̄ goes to v_out and z to
// z_out. open [slots, 2, D] holds each sequence's pre-rotation k̄ | v̄ of
// its last token. A token closing its chunk (t = L − 1) writes its rotated
// k̄ and v̄ as chunk c's row [2, D] of its sequence: pool row
// table[c / block_size] · block_size + c mod block_size of closed
// [blocks, block_size, 2, D].
//
// RatPagedAttention, per row and head h (hd = D / H): one softmax over the
// closed chunks c' < c of the row's sequence and the row's own key,
//   keys {K_c'[h]} ∪ {k_out_r[h]}, values {V_c'[h]} ∪ {v_out_r[h]},
//   out_r[h] = z_r[h] ⊙ Σ softmax(scale · q_r[h] · key) value
// (kernels/rat_chunk_attention.h's equations, then the output gate).
//
// INVALID_ARGUMENT when a size, slot, position or table entry is out of
// range (the table must reach chunk c for every row that closes or sees
// it), checked before anything is written. Slots of a step must be
// distinct.
#ifndef TWICE_KERNELS_RAT_PAGED_H_
#define TWICE_KERNELS_RAT_PAGED_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/paged_attention.h"

namespace twice::kernels {

struct RatPagedDims {
  int64_t dim = 0;         // D
  int64_t heads = 0;       // H; hd = D / H, even
  int64_t groups = 0;      // G, divides H
  int64_t chunk_size = 0;  // L
  int64_t block_size = 0;  // closed-chunk rows per block
  int64_t table_width = 0;
  float rope_base = 10000.0f;

  int64_t head_dim() const { return dim / heads; }
  // in_proj's output width, 3D + 2·G·hd.
  int64_t proj_width() const { return 3 * dim + 2 * groups * head_dim(); }
};

// The checks both ops run (and their device twins before a launch): dims,
// the closed pool whole blocks, the table rows reaching every chunk a row
// closes or sees (row r at position p needs chunk rows [0, (p + 1) / L)).
// RatChunkScan also checks its slots: one per row (one for a prefill),
// distinct, in [0, open slots).
[[nodiscard]] absl::Status CheckRatPagedRows(const PagedRows& rows,
                                             const RatPagedDims& dims,
                                             absl::Span<const int32_t> table,
                                             int64_t closed_floats);

[[nodiscard]] absl::Status RatChunkScan(
    absl::Span<const float> proj, int64_t proj_stride,
    absl::Span<const float> gate_bias, const PagedRows& rows,
    absl::Span<const int32_t> slots, const RatPagedDims& dims,
    absl::Span<const int32_t> table, absl::Span<float> open,
    absl::Span<float> closed, absl::Span<float> q_out, absl::Span<float> k_out,
    absl::Span<float> v_out, absl::Span<float> z_out);

[[nodiscard]] absl::Status RatPagedAttention(
    absl::Span<const float> q, absl::Span<const float> own_k,
    absl::Span<const float> own_v, absl::Span<const float> z,
    const PagedRows& rows, const RatPagedDims& dims,
    absl::Span<const int32_t> table, absl::Span<const float> closed,
    float scale, absl::Span<float> out);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_RAT_PAGED_H_
