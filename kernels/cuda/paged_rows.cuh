// Where the rows of one pass over paged states sit (kernels/paged_attention.h
// PagedRows), for the kernels of paged_attention_cuda.cu and
// rat_paged_cuda.cu. `Args` carries rows' positions (null for a prefill
// pass), start, table and table_width.
#ifndef TWICE_KERNELS_CUDA_PAGED_ROWS_CUH_
#define TWICE_KERNELS_CUDA_PAGED_ROWS_CUH_

#include <algorithm>
#include <cstdint>

namespace twice::kernels::cuda::launch {

inline constexpr int kPagedThreads = 256;

// Blocks of kPagedThreads for `work` threads, capped (the kernels loop
// over their work by the grid's size).
inline unsigned PagedGridBlocks(int64_t work) {
  return static_cast<unsigned>(std::min<int64_t>(
      (work + kPagedThreads - 1) / kPagedThreads, int64_t{1} << 20));
}

// Row r's position: start + r in a prefill pass, positions[r] in a step.
template <typename Args>
__device__ __forceinline__ int64_t PassRowPosition(const Args& a, int64_t r) {
  return a.positions != nullptr ? a.positions[r] : a.start + r;
}

// Row r's block table row: the one sequence's for a prefill pass, its own
// for a step.
template <typename Args>
__device__ __forceinline__ const int32_t* PassTableRow(const Args& a,
                                                       int64_t r) {
  return a.table + (a.positions != nullptr ? r : 0) * a.table_width;
}

}  // namespace twice::kernels::cuda::launch

#endif  // TWICE_KERNELS_CUDA_PAGED_ROWS_CUH_
