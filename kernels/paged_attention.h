// Causal softmax attention over a paged KV cache: the keys and values of
// many sequences kept in one pool of fixed-size blocks (a resident
// executor's full-attention caches, engine/executor/kv_block_table.h), so a
// sequence grows by whole blocks instead of reallocating its cache.
//
// Pool layout: k_pool, v_pool [blocks, block_size, H_kv, hd]. A sequence's
// block table lists its blocks in position order: its token at position p
// lives in pool row table[p / block_size] · block_size + p % block_size.
//
// A call serves the rows of one pass (PagedRows):
//   prefill  positions empty: row r is the token at position start + r of
//            the sequence whose table is table row 0;
//   step     positions one per row: row r is the token at position
//            positions[r] of the sequence whose table is table row r.
// `table` is [table rows, width] (int32 block indices, -1 past a
// sequence's last block); row r needs table entries up to its position's
// block, each in [0, blocks).
//
//   PagedKvWrite          k, v [rows, H_kv, hd] (row strides k_stride,
//                         v_stride) into the pool at each row's position
//                         (keys already rotated: a cached key never
//                         changes)
//   PagedCausalAttention  kernels/attention_decode.h's equations for row r
//                         over the positions [0, p_r] of its sequence
//                         (the row's own key included, so write first):
//                           s_j = scale · q_r[h] · k_j[h / g],
//                           out_r[h] = softmax_j(s) · v_j[h / g],
//                         g = H / H_kv; q [rows, H, hd] (row stride
//                         q_stride), out [rows, H, hd]; f32 throughout,
//                         weights under e^-70 of a row's largest taken as
//                         0 (no denormal arithmetic). A prefill pass of 16
//                         rows or more runs in tiles of rows and keys
//                         (cpu/paged_prefill_attention.h), fewer rows and
//                         steps row by row.
//
// INVALID_ARGUMENT when a size, a position or a table entry is out of
// range, checked before anything is written. Thread-safe for distinct
// outputs; rows of one step must not share a position of one sequence.
#ifndef TWICE_KERNELS_PAGED_ATTENTION_H_
#define TWICE_KERNELS_PAGED_ATTENTION_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace twice::kernels {

struct PagedKvDims {
  int64_t heads = 0;        // H, query heads
  int64_t kv_heads = 0;     // H_kv, divides H
  int64_t head_dim = 0;     // hd
  int64_t block_size = 0;   // token rows per block
  int64_t table_width = 0;  // block entries per table row
};

struct PagedRows {
  int64_t rows = 0;
  int64_t start = 0;                    // prefill: row 0's position
  absl::Span<const int64_t> positions;  // step: one per row
};

// The checks both ops run (and a device twin runs before its launch):
// dims positive, H_kv | H, table [table rows, width] with every block a
// row reaches in [0, blocks), strides and pool sizes consistent.
[[nodiscard]] absl::Status CheckPagedRows(const PagedRows& rows,
                                          const PagedKvDims& dims,
                                          absl::Span<const int32_t> table,
                                          int64_t pool_floats);

// The part of those checks every paged state shares, for pool rows of
// `row_floats` floats in blocks of `block_size` rows: the rows' own checks
// (count, start, one position or none per row), the pool whole blocks, the
// table [table rows, width], and table row t's first blocks_for(p_t)
// entries in [0, blocks), p_t the last position that table row serves.
[[nodiscard]] absl::Status CheckTableReach(
    absl::string_view op, const PagedRows& rows, int64_t block_size,
    int64_t width, int64_t row_floats, absl::Span<const int32_t> table,
    int64_t pool_floats, absl::FunctionRef<int64_t(int64_t)> blocks_for);

[[nodiscard]] absl::Status PagedKvWrite(
    absl::Span<const float> k, int64_t k_stride, absl::Span<const float> v,
    int64_t v_stride, const PagedRows& rows, const PagedKvDims& dims,
    absl::Span<const int32_t> table, absl::Span<float> k_pool,
    absl::Span<float> v_pool);

[[nodiscard]] absl::Status PagedCausalAttention(
    absl::Span<const float> q, int64_t q_stride, const PagedRows& rows,
    const PagedKvDims& dims, absl::Span<const int32_t> table,
    absl::Span<const float> k_pool, absl::Span<const float> v_pool, float scale,
    absl::Span<float> out);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_PAGED_ATTENTION_H_
