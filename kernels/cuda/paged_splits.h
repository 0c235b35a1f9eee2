// How a paged attention of a few rows spreads over a GPU. One warp per
// (row, head) walks the row's positions in order; a decode step of one
// sequence with 32 heads then keeps 32 warps busy on a device with room
// for thousands, each walking the whole context. Splitting each row's
// positions among `splits` warps, each keeping the online-softmax partial
// sums (running max, sum, weighted values) of its share, and combining
// the shares in a second kernel fills the device (flash-decoding).
// Plain C++: the executor chooses, the kernels follow.
#ifndef TWICE_KERNELS_CUDA_PAGED_SPLITS_H_
#define TWICE_KERNELS_CUDA_PAGED_SPLITS_H_

#include <algorithm>
#include <cstdint>

namespace twice::kernels::cuda {

// A share shorter than this costs more to combine than it saves.
inline constexpr int64_t kMinPositionsPerSplit = 128;
inline constexpr int64_t kMaxPagedSplits = 128;
// Warps worth having in flight per multiprocessor (of 48-64 resident).
inline constexpr int64_t kSplitWarpsPerMultiprocessor = 16;

// Splits for `row_heads` (rows x heads) warps' worth of work over up to
// `max_positions` positions per row, to reach about `warps_wanted` warps:
// 1 (no split) when the rows alone fill the device or the rows are short.
// Chosen from the longest position the pass's table can address, not
// from the rows' positions, so a recorded step keeps its splits.
inline int64_t PagedAttentionSplits(int64_t row_heads, int64_t max_positions,
                                    int64_t warps_wanted) {
  if (row_heads <= 0 || max_positions <= 0 || warps_wanted <= row_heads) {
    return 1;
  }
  const int64_t by_work = (warps_wanted + row_heads - 1) / row_heads;
  const int64_t by_length =
      (max_positions + kMinPositionsPerSplit - 1) / kMinPositionsPerSplit;
  return std::clamp<int64_t>(std::min(by_work, by_length), 1, kMaxPagedSplits);
}

// Floats of the partial sums of a split pass: head_dim weighted values,
// the running max and the sum per (row, head, split); 0 unsplit.
inline int64_t PagedSplitFloats(int64_t rows, int64_t heads, int64_t head_dim,
                                int64_t splits) {
  return splits > 1 ? rows * heads * splits * (head_dim + 2) : 0;
}

// The most PagedSplitFloats any pass can need, whatever its rows and
// length: a split pass has rows·H < warps_wanted and splits <=
// ceil(warps_wanted / (rows·H)), so rows·H·splits < 2 · warps_wanted.
// What an executor keeps, so that no batch size or length moves it.
inline int64_t MaxPagedSplitFloats(int64_t head_dim, int64_t warps_wanted) {
  return 2 * warps_wanted * (head_dim + 2);
}

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_PAGED_SPLITS_H_
