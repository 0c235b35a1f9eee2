// Softmax attention over contiguous keys (window and causal GQA: the
// arguments of launch::SoftmaxAttention) for passes of many query rows:
// block per (kRows consecutive query rows, head), one warp per row. The
// block stages the keys and values its rows see (the first row's window
// start to the last row's position) kTileKeys at a time in shared memory,
// so one global read of a key serves the block's rows; each warp updates
// its row's online softmax once per tile (TileSoftmaxRow) and skips the
// tiles wholly outside its row's window. The warp-per-row kernel
// (sequence_cuda.cu) reads every key once per row: for Based's window of
// 256 that is 257 key and value rows per (query, head) from the L2 cache.
#include <cstdint>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/tile_softmax_row.cuh"

namespace twice::kernels::cuda::launch {
namespace {

constexpr int kRows = 16;  // query rows per block, one warp each

__device__ __forceinline__ int64_t WindowStart(const SoftmaxAttentionArgs& a,
                                               int64_t ctx) {
  return a.window < 0 || ctx - a.window < 0 ? 0 : ctx - a.window;
}

// grid (ceil(T / kRows), H), kRows warps; head_dim <= kTileMaxDim.
__global__ void __launch_bounds__(kRows * 32)
    SoftmaxTilesKernel(SoftmaxAttentionArgs a) {
  __shared__ float keys[kTileKeys * kTileKeyStride];
  __shared__ float values[kTileKeys * kTileMaxDim];
  __shared__ float queries[kRows * kTileMaxDim];
  const int hd = a.head_dim;
  const int h = blockIdx.y;
  const int64_t kv_row = int64_t{a.kv_heads} * hd;
  const int64_t kv_off = int64_t{h / (a.heads / a.kv_heads)} * hd;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const TileBlockRows b = ThisBlockRows(a.tokens, kRows);
  const int64_t ctx = a.past + b.row;  // this warp's row position
  const int64_t lo = WindowStart(a, ctx);
  const int64_t block_hi = a.past + b.last;
  StageQueryRows(a.q, a.q_stride, h, hd, b, kRows, queries);
  const auto key_row = [&](int64_t pos) { return pos * kv_row; };
  TileSoftmaxRow row;
  for (int64_t base = WindowStart(a, a.past + b.first); base <= block_hi;
       base += kTileKeys) {
    __syncthreads();  // the previous tile is read (and the queries written)
    StageKeyTile(a.k + kv_off, a.v + kv_off, hd, base, block_hi, key_row, keys,
                 values);
    __syncthreads();
    // Warp-uniform: a finished warp, or a tile past the row's position (no
    // tile lies wholly before a row's window start: the first starts at the
    // block's first row's, at most kRows - 1 < kTileKeys before it).
    if (!b.active || base > ctx) continue;
    const int64_t pos = base + lane;
    row.Visit(queries + warp * kTileMaxDim, keys, values, hd, a.scale,
              pos >= lo && pos <= ctx);
  }
  if (b.active) row.Store(a.out + (b.row * a.heads + h) * hd, hd);
}

}  // namespace

cudaError_t SoftmaxAttentionTiles(const SoftmaxAttentionArgs& args,
                                  cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((args.tokens + kRows - 1) / kRows),
                  static_cast<unsigned>(args.heads));
  SoftmaxTilesKernel<<<grid, kRows * 32, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
