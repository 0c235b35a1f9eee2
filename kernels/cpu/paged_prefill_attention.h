// The CPU form of kernels/paged_attention.h's PagedCausalAttention for a
// prefill pass (rows start .. start + rows - 1 of one sequence, table row
// `blocks`), in tiles: a task per (kPrefillTileRows consecutive rows, head)
// walks the keys in blocks of kPrefillTileKeys positions. A block's keys
// are gathered once for the tile's rows, transposed [hd, keys], so a row's
// scores are hd vector multiply-adds across the keys (no per-key
// reduction); each row's online softmax (running maximum, sum and weighted
// values) updates once per block, weights under e^-70 of the maximum's
// being 0 as in the per-row kernel. Arguments are checked by the caller.
#ifndef TWICE_KERNELS_CPU_PAGED_PREFILL_ATTENTION_H_
#define TWICE_KERNELS_CPU_PAGED_PREFILL_ATTENTION_H_

#include <cstdint>

#include "kernels/paged_attention.h"

namespace twice::kernels::cpu {

inline constexpr int64_t kPrefillTileRows = 16;
inline constexpr int64_t kPrefillTileKeys = 64;

// q [rows, H, hd] (row stride q_stride), out [rows, H, hd].
void PagedPrefillAttention(const float* q, int64_t q_stride, int64_t rows,
                           int64_t start, const PagedKvDims& dims,
                           const int32_t* blocks, const float* k_pool,
                           const float* v_pool, float scale, float* out);

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_PAGED_PREFILL_ATTENTION_H_
