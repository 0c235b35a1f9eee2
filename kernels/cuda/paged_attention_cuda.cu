// Paged KV cache on CUDA (CPU twins: kernels/paged_attention.h), f32.
//
// Layout: k_pool, v_pool [blocks, block_size, H_kv, hd]; row r of a pass
// sits at position p_r (start + r of table row 0 for a prefill, else
// positions[r] of table row r), and position j of table row t lives in
// pool row table[t · width + j / block_size] · block_size + j % block_size.
//
//   PagedKvWrite          thread per (row, element e of H_kv · hd): the
//                         row's k and v values into its position's pool row.
//   PagedCausalAttention  a step's rows (and a prefill pass of fewer than
//                         kTileRows rows): warp per (row, head), warps
//                         looping over the (row, head) pairs by the grid's
//                         warp count; the warp walks the row's blocks in
//                         position order over j = 0 .. p_r with
//                         WarpSoftmaxRow (keys k_j[h / g], hd <= 128).
//                         A prefill pass of kPagedFlashMinRows rows or
//                         more at head dim 64 or 128 runs on the tensor
//                         cores (paged_flash_prefill_cuda.cu); another
//                         prefill pass: PagedPrefillTileKernel, one
//                         block per (kTileRows consecutive rows, head). The
//                         block loads the keys and values of kTileKeys
//                         positions at a time into shared memory (one
//                         global read serves the block's kTileRows rows),
//                         from position 0 to its last row's; in a warp
//                         (one row) lane j scores key j of the tile, the
//                         tile's maximum and sum update the row's online
//                         softmax once, and lane l accumulates dims
//                         l + 32 r of the weighted values
//                         (TileSoftmaxRow, tile_softmax_row.cuh). Keys after
//                         a row's position weigh 0.
//                         Split (paged_splits.h): warp per (row, head,
//                         split s of S), walking the s-th of S equal
//                         shares of the row's positions [0, p_r] and
//                         storing its partial sums; then warp per (row,
//                         head) combining the S shares (empty shares, sum
//                         0, are skipped).
#include <algorithm>
#include <cfloat>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/paged_rows.cuh"
#include "kernels/cuda/tile_softmax_row.cuh"
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

// grid-stride over (row, head, split) warps; partials [rows, H, splits,
// hd + 2] (WarpSoftmaxRow::StorePartial). Warps are numbered with the
// query heads of one key head innermost, so the warps that read the same
// keys and values (grouped-query attention) sit in one block and share
// them through its cache.
__global__ void PagedAttentionSplitKernel(PagedRowsArgs a, const float* q,
                                          int64_t q_stride, const float* k_pool,
                                          const float* v_pool, float scale,
                                          int splits, float* partials) {
  const int64_t warps = (int64_t{gridDim.x} * blockDim.x) >> 5;
  const int hd = a.head_dim;
  const int group = a.heads / a.kv_heads;
  const int64_t kv_row = int64_t{a.kv_heads} * hd;
  for (int64_t w = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) >> 5;
       w < a.rows * a.heads * splits; w += warps) {
    // w = ((r · H_kv + kv head) · splits + s) · group + head in group.
    const int in_group = static_cast<int>(w % group);
    const int64_t share_of_kv = w / group;
    const int64_t s = share_of_kv % splits;
    const int64_t row_kv = share_of_kv / splits;
    const int64_t r = row_kv / a.kv_heads;
    const int h = static_cast<int>(row_kv % a.kv_heads) * group + in_group;
    const int64_t row_head = r * a.heads + h;
    const int64_t n = PassRowPosition(a, r) + 1;  // positions [0, n)
    const int64_t share = (n + splits - 1) / splits;
    const int64_t begin = s * share;
    const int64_t end = begin + share < n ? begin + share : n;
    const int32_t* blocks = PassTableRow(a, r);
    const int64_t kv_off = int64_t{h / group} * hd;
    WarpSoftmaxRow row(q + r * q_stride + int64_t{h} * hd, hd, scale);
    for (int64_t j = begin; j < end;) {
      const int64_t in_block = j % a.block_size;
      const int64_t count =
          end - j < a.block_size - in_block ? end - j : a.block_size - in_block;
      const int64_t base =
          int64_t{blocks[j / a.block_size]} * a.block_size + in_block;
      for (int64_t t = 0; t < count; ++t) {
        row.Visit(k_pool + (base + t) * kv_row + kv_off,
                  v_pool + (base + t) * kv_row + kv_off);
      }
      j += count;
    }
    row.StorePartial(partials + (row_head * splits + s) * (hd + 2));
  }
}

// Warp per (row, head): out = sum_s e^{m_s - M} acc_s / sum_s e^{m_s - M}
// l_s over the shares with l_s != 0 (M their largest max; share 0 holds
// position 0, so at least one has).
__global__ void CombineSplitsKernel(int64_t row_heads, int hd, int splits,
                                    const float* partials, float* out) {
  const int64_t warps = (int64_t{gridDim.x} * blockDim.x) >> 5;
  const int lane = threadIdx.x & 31;
  const int64_t part = hd + 2;
  for (int64_t w = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) >> 5;
       w < row_heads; w += warps) {
    const float* p = partials + w * splits * part;
    float m = -FLT_MAX;
    for (int s = 0; s < splits; ++s) {
      // Only an empty share (sum exactly 0) is skipped: a NaN sum carries
      // on into the output, as the unsplit kernel and the CPU give it.
      if (p[s * part + hd + 1] != 0.0f) m = fmaxf(m, p[s * part + hd]);
    }
    float l = 0.0f;
    float acc[kWarpRowDims];
#pragma unroll
    for (int d = 0; d < kWarpRowDims; ++d) acc[d] = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float* share = p + s * part;
      const float ls = share[hd + 1];
      if (ls == 0.0f) continue;  // an empty share (warp-uniform)
      const float weight = __expf(share[hd] - m);
      l += ls * weight;
#pragma unroll
      for (int d = 0; d < kWarpRowDims; ++d) {
        const int e = lane + 32 * d;
        if (e < hd) acc[d] += weight * share[e];
      }
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int d = 0; d < kWarpRowDims; ++d) {
      const int e = lane + 32 * d;
      if (e < hd) out[w * hd + e] = acc[d] * inv;
    }
  }
}

constexpr int kTileRows = 8;  // query rows per block, one warp each

// grid (ceil(rows / kTileRows), H), kTileRows warps. Requires a prefill
// pass (positions null) and hd <= kTileMaxDim.
__global__ void PagedPrefillTileKernel(PagedRowsArgs a, const float* q,
                                       int64_t q_stride, const float* k_pool,
                                       const float* v_pool, float scale,
                                       float* out) {
  __shared__ float keys[kTileKeys * kTileKeyStride];
  __shared__ float values[kTileKeys * kTileMaxDim];
  __shared__ float queries[kTileRows * kTileMaxDim];
  const int hd = a.head_dim;
  const int h = blockIdx.y;
  const int group = a.heads / a.kv_heads;
  const int64_t kv_row = int64_t{a.kv_heads} * hd;
  const int64_t kv_off = int64_t{h / group} * hd;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const TileBlockRows b = ThisBlockRows(a.rows, kTileRows);
  const int64_t p = a.start + b.row;  // this warp's row position
  const int64_t last_p = a.start + b.last;
  StageQueryRows(q, q_stride, h, hd, b, kTileRows, queries);
  const auto pool_row = [&](int64_t pos) {
    return (int64_t{a.table[pos / a.block_size]} * a.block_size +
            pos % a.block_size) *
           kv_row;
  };
  TileSoftmaxRow row;
  for (int64_t base = 0; base <= last_p; base += kTileKeys) {
    __syncthreads();  // the previous tile is read
    StageKeyTile(k_pool + kv_off, v_pool + kv_off, hd, base, last_p, pool_row,
                 keys, values);
    __syncthreads();
    if (!b.active) continue;  // warp-uniform
    // Keys after this row's position weigh 0.
    row.Visit(queries + warp * kTileMaxDim, keys, values, hd, scale,
              base + lane <= p);
  }
  if (b.active) row.Store(out + (b.row * a.heads + h) * hd, hd);
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
                                 int splits, float* partials,
                                 cudaStream_t stream) {
  if (rows.positions == nullptr && rows.rows >= kPagedFlashMinRows &&
      PagedFlashPrefillSupported(rows.head_dim) && rows.heads <= 65535) {
    return PagedFlashPrefill(rows, q, q_stride, k_pool, v_pool, scale, out,
                             stream);
  }
  if (rows.positions == nullptr && rows.rows >= kTileRows &&
      rows.head_dim <= kTileMaxDim) {
    const dim3 grid(
        static_cast<unsigned>((rows.rows + kTileRows - 1) / kTileRows),
        static_cast<unsigned>(rows.heads));
    PagedPrefillTileKernel<<<grid, kTileRows * 32, 0, stream>>>(
        rows, q, q_stride, k_pool, v_pool, scale, out);
    return cudaGetLastError();
  }
  if (splits > 1) {
    const int64_t row_heads = rows.rows * rows.heads;
    PagedAttentionSplitKernel<<<PagedGridBlocks(row_heads * splits * 32),
                                kPagedThreads, 0, stream>>>(
        rows, q, q_stride, k_pool, v_pool, scale, splits, partials);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    CombineSplitsKernel<<<PagedGridBlocks(row_heads * 32), kPagedThreads, 0,
                          stream>>>(row_heads, rows.head_dim, splits, partials,
                                    out);
    return cudaGetLastError();
  }
  PagedAttentionKernel<<<PagedGridBlocks(rows.rows * rows.heads * 32),
                         kPagedThreads, 0, stream>>>(rows, q, q_stride, k_pool,
                                                     v_pool, scale, out);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
