// Paged KV cache on CUDA (CPU twins: kernels/paged_attention.h), f32.
//
// Layout: k_pool, v_pool [blocks, block_size, H_kv, hd]; row r of a pass
// sits at position p_r (start + r of table row 0 for a prefill, else
// positions[r] of table row r), and position j of table row t lives in
// pool row table[t · width + j / block_size] · block_size + j % block_size.
//
//   PagedKvWrite          thread per (row, element e of H_kv · hd): the
//                         row's k and v values into its position's pool row.
//   PagedCausalAttention  warp per (row, head), warps looping over the
//                         (row, head) pairs by the grid's warp count; the
//                         warp walks the row's blocks in position order
//                         over j = 0 .. p_r with WarpSoftmaxRow (keys
//                         k_j[h / g], hd <= 128).
#include <algorithm>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/paged_rows.cuh"
#include "kernels/cuda/warp_softmax_row.cuh"

namespace twice::kernels::cuda::launch {
namespace {

__global__ void PagedKvWriteKernel(PagedRowsArgs a, const float* k,
                                   int64_t k_stride, const float* v,
                                   int64_t v_stride, float* k_pool,
                                   float* v_pool) {
  const int64_t kv_row = int64_t{a.kv_heads} * a.head_dim;
  const int64_t total = a.rows * kv_row;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / kv_row;
    const int64_t e = i % kv_row;
    const int64_t p = PassRowPosition(a, r);
    const int64_t pool_row =
        int64_t{PassTableRow(a, r)[p / a.block_size]} * a.block_size +
        p % a.block_size;
    k_pool[pool_row * kv_row + e] = k[r * k_stride + e];
    v_pool[pool_row * kv_row + e] = v[r * v_stride + e];
  }
}

// The loop bound is the same for all lanes of a warp, so the shuffles stay
// convergent.
__global__ void PagedAttentionKernel(PagedRowsArgs a, const float* q,
                                     int64_t q_stride, const float* k_pool,
                                     const float* v_pool, float scale,
                                     float* out) {
  const int64_t warps = (int64_t{gridDim.x} * blockDim.x) >> 5;
  const int hd = a.head_dim;
  const int group = a.heads / a.kv_heads;
  const int64_t kv_row = int64_t{a.kv_heads} * hd;
  for (int64_t w = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) >> 5;
       w < a.rows * a.heads; w += warps) {
    const int64_t r = w / a.heads;
    const int h = static_cast<int>(w % a.heads);
    const int64_t p = PassRowPosition(a, r);
    const int32_t* blocks = PassTableRow(a, r);
    const int64_t kv_off = int64_t{h / group} * hd;
    WarpSoftmaxRow row(q + r * q_stride + int64_t{h} * hd, hd, scale);
    for (int64_t b = 0, first = 0; first <= p; ++b, first += a.block_size) {
      const int64_t base = int64_t{blocks[b]} * a.block_size;
      const int64_t count =
          p + 1 - first < a.block_size ? p + 1 - first : a.block_size;
      for (int64_t t = 0; t < count; ++t) {
        row.Visit(k_pool + (base + t) * kv_row + kv_off,
                  v_pool + (base + t) * kv_row + kv_off);
      }
    }
    row.Store(out + (r * a.heads + h) * hd);
  }
}

}  // namespace

cudaError_t PagedKvWrite(const PagedRowsArgs& rows, const float* k,
                         int64_t k_stride, const float* v, int64_t v_stride,
                         float* k_pool, float* v_pool, cudaStream_t stream) {
  const int64_t work = rows.rows * rows.kv_heads * rows.head_dim;
  PagedKvWriteKernel<<<PagedGridBlocks(work), kPagedThreads, 0, stream>>>(
      rows, k, k_stride, v, v_stride, k_pool, v_pool);
  return cudaGetLastError();
}

cudaError_t PagedCausalAttention(const PagedRowsArgs& rows, const float* q,
                                 int64_t q_stride, const float* k_pool,
                                 const float* v_pool, float scale, float* out,
                                 cudaStream_t stream) {
  PagedAttentionKernel<<<PagedGridBlocks(rows.rows * rows.heads * 32),
                         kPagedThreads, 0, stream>>>(rows, q, q_stride, k_pool,
                                                     v_pool, scale, out);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
