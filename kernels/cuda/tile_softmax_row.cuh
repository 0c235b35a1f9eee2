// TileSoftmaxRow: one warp's online softmax attention for one query row over
// tiles of kTileKeys keys that a block has staged in shared memory, shared
// by the kernels whose query rows read the same keys (paged_attention_cuda.cu
// for a prefill pass over the paged cache, softmax_tiles_cuda.cu for window
// and causal attention over contiguous keys): one global read of a key
// then serves every row of the block, where WarpSoftmaxRow (one warp per
// row, keys from global memory one at a time) reads it once per row.
//
// Per tile, lane j scores key j of the tile; the tile's maximum and sum
// update the row's running max m and sum l once:
//   m' = max(m, max_j s_j),  l = l e^{m-m'} + sum_j e^{s_j-m'},
//   acc = acc e^{m-m'} + sum_j e^{s_j-m'} v_j,
// and lane l accumulates dims l + 32 r (r < kWarpRowDims) of the weighted
// values. A key outside the row's range (`valid` false) weighs 0.
#ifndef TWICE_KERNELS_CUDA_TILE_SOFTMAX_ROW_CUH_
#define TWICE_KERNELS_CUDA_TILE_SOFTMAX_ROW_CUH_

#include <cfloat>

#include "kernels/cuda/warp_softmax_row.cuh"

namespace twice::kernels::cuda::launch {

inline constexpr int kTileKeys = 32;  // positions per shared tile, one per lane
inline constexpr int kTileMaxDim = 128;
// Key rows padded by one float: lane j reading dim e of key j hits bank
// (j · kTileKeyStride + e) % 32 = (j + e) % 32, distinct across the warp.
inline constexpr int kTileKeyStride = kTileMaxDim + 1;

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;
}

// The query rows of this block (blockIdx.x) when blocks take `per_block`
// consecutive rows of `rows`, one warp each: this warp's row and whether
// it has one (the last block may be short).
struct TileBlockRows {
  int64_t first, last, row;
  bool active;
};
__device__ __forceinline__ TileBlockRows ThisBlockRows(int64_t rows,
                                                       int per_block) {
  TileBlockRows b;
  b.first = int64_t{blockIdx.x} * per_block;
  b.last = (b.first + per_block < rows ? b.first + per_block : rows) - 1;
  b.row = b.first + (threadIdx.x >> 5);
  b.active = b.row <= b.last;
  return b;
}

// Stages the block's query rows (head h of rows b.first .. b.last of q, zero
// past b.last) at queries + w · kTileMaxDim for warp w, where that warp
// reads its row (packing the rows hd apart would hand warp w another row
// whenever hd < kTileMaxDim). The whole block calls it before a
// __syncthreads.
__device__ __forceinline__ void StageQueryRows(const float* q, int64_t q_stride,
                                               int h, int hd,
                                               const TileBlockRows& b,
                                               int per_block, float* queries) {
  for (int i = threadIdx.x; i < per_block * hd; i += blockDim.x) {
    const int64_t row = b.first + i / hd;
    queries[(i / hd) * kTileMaxDim + i % hd] =
        row <= b.last ? q[row * q_stride + int64_t{h} * hd + i % hd] : 0.0f;
  }
}

// Stages keys [base, base + kTileKeys) of one head into shared memory: key
// row j of the tile at keys + j · kTileKeyStride, its value row at values
// + j · kTileMaxDim; `row_of(pos)` is the key's row in k_rows / v_rows
// (floats from the head's first dim), positions past `last` are zero. The
// whole block calls it between two __syncthreads.
template <typename RowOf>
__device__ __forceinline__ void StageKeyTile(const float* k_rows,
                                             const float* v_rows, int hd,
                                             int64_t base, int64_t last,
                                             RowOf row_of, float* keys,
                                             float* values) {
  for (int i = threadIdx.x; i < kTileKeys * hd; i += blockDim.x) {
    const int j = i / hd, e = i % hd;
    const int64_t pos = base + j;
    float k = 0.0f, v = 0.0f;
    if (pos <= last) {
      const int64_t at = row_of(pos) + e;
      k = k_rows[at];
      v = v_rows[at];
    }
    keys[j * kTileKeyStride + e] = k;
    values[j * kTileMaxDim + e] = v;
  }
}

class TileSoftmaxRow {
 public:
  __device__ TileSoftmaxRow() : lane_(threadIdx.x & 31) {
#pragma unroll
    for (int d = 0; d < kWarpRowDims; ++d) acc_[d] = 0.0f;
  }

  // One staged tile against the row's query q (shared, hd floats); `valid`:
  // whether this lane's key is in the row's range. Every lane of the warp
  // calls it.
  __device__ __forceinline__ void Visit(const float* q, const float* keys,
                                        const float* values, int hd,
                                        float scale, bool valid) {
    const float* kj = keys + lane_ * kTileKeyStride;
    float dot = 0.0f;
    for (int e = 0; e < hd; ++e) dot += q[e] * kj[e];
    const float s = valid ? dot * scale : -FLT_MAX;
    const float m_new = fmaxf(m_, WarpMax(s));
    const float corr = __expf(m_ - m_new);
    const float w = valid ? __expf(s - m_new) : 0.0f;
    l_ = l_ * corr + WarpSum(w);
#pragma unroll
    for (int d = 0; d < kWarpRowDims; ++d) acc_[d] *= corr;
    for (int j = 0; j < kTileKeys; ++j) {
      const float wj = __shfl_sync(0xffffffffu, w, j);
#pragma unroll
      for (int d = 0; d < kWarpRowDims; ++d) {
        const int e = lane_ + 32 * d;
        if (e < hd) acc_[d] += wj * values[j * kTileMaxDim + e];
      }
    }
    m_ = m_new;
  }

  // One more key from global memory, k and v the head's hd floats (RAT's
  // own key after its chunks'): the warp's dot product, then the same
  // update as a tile of one key.
  __device__ __forceinline__ void VisitOne(const float* q, const float* k,
                                           const float* v, int hd,
                                           float scale) {
    float dot = 0.0f;
#pragma unroll
    for (int d = 0; d < kWarpRowDims; ++d) {
      const int e = lane_ + 32 * d;
      if (e < hd) dot += q[e] * k[e];
    }
    AddKeyToRow(WarpSum(dot) * scale, v, lane_, hd, m_, l_, acc_);
  }

  // out[e] = acc_e / l for e < hd (0 with no key visited).
  __device__ void Store(float* out, int hd) const {
    const float inv = l_ > 0.0f ? 1.0f / l_ : 0.0f;
#pragma unroll
    for (int d = 0; d < kWarpRowDims; ++d) {
      const int e = lane_ + 32 * d;
      if (e < hd) out[e] = acc_[d] * inv;
    }
  }

 private:
  const int lane_;
  float m_ = -FLT_MAX;
  float l_ = 0.0f;
  float acc_[kWarpRowDims];
};

}  // namespace twice::kernels::cuda::launch

#endif  // TWICE_KERNELS_CUDA_TILE_SOFTMAX_ROW_CUH_
