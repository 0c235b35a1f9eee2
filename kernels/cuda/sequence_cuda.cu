// Sequence mixers on CUDA (f32 unless noted): causal short convolution,
// softmax attention over row ranges (sliding window, full causal GQA), RAT
// inter-chunk attention, the Mamba-2 SSD scan, and the bf16 flash-style
// causal attention the benchmarks use as the in-repo softmax baseline.
// Equations and layouts: kernels/cuda/cuda_ops.h (and the CPU entry points
// in kernels/ they mirror).
//
//   CausalConv1d   thread per (t, c) output; then one thread per channel
//                  shifts the tail in order (rows are read before written).
//                  The *Segments forms run every sequence of a prefill pass
//                  in one launch (grid y / z = the pass's segment), each
//                  with its slot's tail or state.
//   Softmax rows   one warp per (query, head) for passes of fewer than
//                  kSoftmaxTileMinRows rows (longer ones stage their keys
//                  in shared memory: softmax_tiles_cuda.cu); lane l owns
//                  dims l + 32 r below hd (r < 4, so any hd <= 128; dims
//                  past hd are never loaded or stored); keys in order with
//                  the online softmax (running max m, sum l):
//                  m' = max(m, s), l = l e^{m-m'} + e^{s-m'},
//                  acc = acc e^{m-m'} + e^{s-m'} v.
//   RAT            the same loop over the visible closed-chunk keys, then
//                  the token's own running key.
//   SSD            recurrent form, exactly the function of the chunked scan
//                  (kernels/ssd_chunk_scan.h): warp per (head, channel p),
//                  lanes own state dims n; per token
//                  S = e^{dt A} S + dt x_p B,  y_p = S . C + D x_p.
//                  For decode steps and short reads; long reads run the
//                  chunked form (ssd_chunked_cuda.cu).
//   Flash (bf16)   64 queries per block (4 warps x 16 rows), key tiles of
//                  64 (FlashTile, flash_tile.cuh): S = Q K^T and O += P V
//                  with wmma (f32 accumulate), the online softmax on the
//                  CUDA cores, O kept in shared memory (f32) and rescaled
//                  per tile.
#include <cuda_bf16.h>

#include <algorithm>
#include <cfloat>

#include "kernels/cuda/flash_tile.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/warp_softmax_row.cuh"

namespace twice::kernels::cuda::launch {
namespace {

using bf16 = __nv_bfloat16;

unsigned Blocks(int64_t work, int threads) {
  return static_cast<unsigned>(
      std::min<int64_t>((work + threads - 1) / threads, int64_t{1} << 20));
}

// Output (t, c) of the convolution over concat(tail, x) (x's rows at
// x_stride).
__device__ float ConvOutput(const float* x, int64_t channels, int64_t x_stride,
                            const float* w, int k, const float* tail, int64_t t,
                            int64_t c) {
  float acc = 0.0f;
  for (int j = 0; j < k; ++j) {
    const int64_t u = t + j;  // row of concat(tail, x)
    const float val =
        u < k - 1 ? tail[u * channels + c] : x[(u - (k - 1)) * x_stride + c];
    acc += w[c * k + j] * val;
  }
  return acc;
}

// Channel c of the tail after `tokens` more rows of x.
__device__ void ShiftTail(const float* x, int64_t tokens, int64_t channels,
                          int64_t x_stride, int k, float* tail, int64_t c) {
  // New row r is row tokens + r of u; ascending r reads rows > r first.
  for (int r = 0; r < k - 1; ++r) {
    const int64_t u = tokens + r;
    tail[r * channels + c] =
        u < k - 1 ? tail[u * channels + c] : x[(u - (k - 1)) * x_stride + c];
  }
}

__global__ void ConvKernel(const float* x, int64_t tokens, int64_t channels,
                           int64_t x_stride, const float* w, int k,
                           const float* tail, float* out) {
  const int64_t total = tokens * channels;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / channels;
    const int64_t c = i % channels;
    out[t * channels + c] = ConvOutput(x, channels, x_stride, w, k, tail, t, c);
  }
}

__global__ void ConvTailKernel(const float* x, int64_t tokens, int64_t channels,
                               int64_t x_stride, int k, float* tail) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= channels) return;
  ShiftTail(x, tokens, channels, x_stride, k, tail, c);
}

// The same per segment of a pass (grid row y = segment), each with its
// slot's tail out of tails [slots, k - 1, channels].
__global__ void ConvSegmentsKernel(const float* x, int64_t channels,
                                   int64_t x_stride, const float* w, int k,
                                   const float* tails,
                                   const PassSegment* segments, float* out) {
  const PassSegment s = segments[blockIdx.y];
  const float* sx = x + s.first_row * x_stride;
  const float* tail = tails + s.slot * (k - 1) * channels;
  float* so = out + s.first_row * channels;
  const int64_t total = s.rows * channels;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / channels;
    const int64_t c = i % channels;
    so[t * channels + c] = ConvOutput(sx, channels, x_stride, w, k, tail, t, c);
  }
}

__global__ void ConvTailSegmentsKernel(const float* x, int64_t channels,
                                       int64_t x_stride, int k, float* tails,
                                       const PassSegment* segments) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= channels) return;
  const PassSegment s = segments[blockIdx.y];
  ShiftTail(x + s.first_row * x_stride, s.rows, channels, x_stride, k,
            tails + s.slot * (k - 1) * channels, c);
}

// Online softmax over keys [lo, hi] (inclusive) of rows with stride
// k_stride / v_stride, then optionally one extra key (own_k, own_v).
__device__ void SoftmaxRow(const float* qrow, const float* k0, int64_t k_stride,
                           const float* v0, int64_t v_stride, int64_t lo,
                           int64_t hi, const float* own_k, const float* own_v,
                           int hd, float scale, float* out_row) {
  WarpSoftmaxRow row(qrow, hd, scale);
  for (int64_t j = lo; j <= hi; ++j)
    row.Visit(k0 + j * k_stride, v0 + j * v_stride);
  if (own_k != nullptr) row.Visit(own_k, own_v);
  row.Store(out_row);
}

// Warp-per-(token, head) kernels loop over their work by the grid's warp
// count: the grid is capped (Blocks) and one warp may own several rows.
// The loop bound is the same for all lanes of a warp, so the shuffles in
// SoftmaxRow stay convergent.
__global__ void SoftmaxAttentionKernel(SoftmaxAttentionArgs a) {
  const int64_t warps = (int64_t{gridDim.x} * blockDim.x) >> 5;
  for (int64_t warp_id = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) >> 5;
       warp_id < a.tokens * a.heads; warp_id += warps) {
    const int64_t i = warp_id / a.heads;
    const int h = static_cast<int>(warp_id % a.heads);
    const int kvh = h / (a.heads / a.kv_heads);
    const int64_t ctx = a.past + i;
    const int64_t lo = a.window < 0 || ctx - a.window < 0 ? 0 : ctx - a.window;
    const int64_t row = int64_t{a.kv_heads} * a.head_dim;
    SoftmaxRow(a.q + i * a.q_stride + int64_t{h} * a.head_dim,
               a.k + int64_t{kvh} * a.head_dim, row,
               a.v + int64_t{kvh} * a.head_dim, row, lo, ctx, nullptr, nullptr,
               a.head_dim, a.scale, a.out + (i * a.heads + h) * a.head_dim);
  }
}

__global__ void RatAttentionKernel(RatAttentionArgs a) {
  const int64_t warps = (int64_t{gridDim.x} * blockDim.x) >> 5;
  for (int64_t warp_id = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) >> 5;
       warp_id < a.tokens * a.heads; warp_id += warps) {
    const int64_t t = warp_id / a.heads;
    const int64_t h = warp_id % a.heads;
    const int64_t hoff = h * a.head_dim;
    SoftmaxRow(a.q + t * a.q_stride + hoff, a.chunk_k + hoff, a.chunk_k_stride,
               a.chunk_v + hoff, a.chunk_v_stride, 0, a.visible[t] - 1,
               a.own_k + t * a.own_k_stride + hoff,
               a.own_v + t * a.own_v_stride + hoff, a.head_dim, a.scale,
               a.out + (t * a.heads + h) * a.head_dim);
  }
}

constexpr int kMaxStatePerLane = 4;  // state dims N <= 128

// Warp (head h, channel p): `tokens` rows of the scan from row first_row of
// x, B, C, dt and y, continuing the state `ssm_state` [H, P, N]; lanes own
// n = lane + 32 r.
__device__ void SsdRecurrence(const SsdArgs& a, int64_t first_row,
                              int64_t tokens, float* ssm_state, int h, int p,
                              int lane) {
  const int g = h / (a.heads / a.groups);
  const int per = (a.state + 31) / 32;
  float* s_global = ssm_state + (int64_t{h} * a.head_dim + p) * a.state;
  float s[kMaxStatePerLane];
  for (int r = 0; r < per; ++r) {
    const int n = lane + 32 * r;
    s[r] = n < a.state ? s_global[n] : 0.0f;
  }
  const float a_h = a.a[h];
  const float d_h = a.d[h];
  const int64_t ch = int64_t{h} * a.head_dim + p;
  const int64_t hp = int64_t{a.heads} * a.head_dim;
  for (int64_t t = first_row; t < first_row + tokens; ++t) {
    const float dt = a.dt[t * a.heads + h];
    const float x = a.x[t * a.x_stride + ch];
    // expf, not __expf: the decay compounds in the state over every step
    // (__expf is ~11 ulp off at dt·A = -8), and the CPU uses std::exp.
    const float decay = expf(dt * a_h);
    const float* bt = a.b + t * a.bc_stride + int64_t{g} * a.state;
    const float* ct = a.c + t * a.bc_stride + int64_t{g} * a.state;
    float dot = 0.0f;
    for (int r = 0; r < per; ++r) {
      const int n = lane + 32 * r;
      if (n < a.state) {
        s[r] = decay * s[r] + dt * x * bt[n];
        dot += s[r] * ct[n];
      }
    }
    dot = WarpSum(dot);
    if (lane == 0) a.y[t * hp + ch] = dot + d_h * x;
  }
  for (int r = 0; r < per; ++r) {
    const int n = lane + 32 * r;
    if (n < a.state) s_global[n] = s[r];
  }
}

// grid (heads, ceil(P / warps)); warp w of block (h, pb) owns channel
// p = pb * warps + w of head h.
__global__ void SsdKernel(SsdArgs a) {
  const int warps = blockDim.x >> 5;
  const int p = blockIdx.y * warps + (threadIdx.x >> 5);
  if (p >= a.head_dim) return;
  SsdRecurrence(a, 0, a.tokens, a.ssm_state, blockIdx.x, p, threadIdx.x & 31);
}

// The same with grid depth z = segment of a pass: its rows and its slot's
// state out of the pool a.ssm_state [slots, H, P, N].
__global__ void SsdSegmentsKernel(SsdArgs a, const PassSegment* segments) {
  const int warps = blockDim.x >> 5;
  const int p = blockIdx.y * warps + (threadIdx.x >> 5);
  if (p >= a.head_dim) return;
  const PassSegment s = segments[blockIdx.z];
  const int64_t state_floats = int64_t{a.heads} * a.head_dim * a.state;
  SsdRecurrence(a, s.first_row, s.rows, a.ssm_state + s.slot * state_floats,
                blockIdx.x, p, threadIdx.x & 31);
}

// ---- flash-style causal attention, bf16, head_dim 64 ------------------------
constexpr int kFaHd = 64;
using FaTile = FlashTile<kFaHd>;

__global__ void __launch_bounds__(kFlashWarps * 32)
    FlashKernel(const bf16* q, const bf16* k, const bf16* v, int64_t tokens,
                int heads, float scale, bf16* out) {
  extern __shared__ __align__(128) unsigned char smem[];
  FaTile tile(smem);
  const int h = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int64_t row = int64_t{heads} * kFaHd;  // elements between tokens
  const int64_t base = b * tokens * row + int64_t{h} * kFaHd;
  const int64_t q0 = int64_t{blockIdx.x} * kFlashRows;
  const bf16 zero = __float2bfloat16(0.0f);

  for (int r = threadIdx.x; r < kFlashRows * kFaHd; r += blockDim.x) {
    const int64_t t = q0 + r / kFaHd;
    tile.q[r] = t < tokens ? q[base + t * row + r % kFaHd] : zero;
  }
  tile.Reset();
  const auto sees = [&](int i, int64_t pos) {
    return pos <= q0 + i && pos < tokens;
  };
  const int64_t last_key =
      (q0 + kFlashRows < tokens ? q0 + kFlashRows : tokens) - 1;
  for (int64_t k0 = 0; k0 <= last_key; k0 += kFlashKeys) {
    __syncthreads();  // the previous tile's keys and values are read
    for (int r = threadIdx.x; r < kFlashKeys * kFaHd; r += blockDim.x) {
      const int64_t t = k0 + r / kFaHd;
      const bool in = t < tokens;
      tile.k[r] = in ? k[base + t * row + r % kFaHd] : zero;
      tile.v[r] = in ? v[base + t * row + r % kFaHd] : zero;
    }
    __syncthreads();
    tile.Update((threadIdx.x >> 5) * 16, k0, scale, sees);
  }
  __syncthreads();
  for (int r = threadIdx.x; r < kFlashRows * kFaHd; r += blockDim.x) {
    const int64_t t = q0 + r / kFaHd;
    if (t < tokens) {
      out[base + t * row + r % kFaHd] =
          __float2bfloat16(tile.Out(r / kFaHd, r % kFaHd));
    }
  }
}

}  // namespace

cudaError_t CausalConv1d(const float* x, int64_t tokens, int64_t channels,
                         int64_t x_stride, const float* w, int kernel_size,
                         float* tail, float* out, cudaStream_t stream) {
  ConvKernel<<<Blocks(tokens * channels, 256), 256, 0, stream>>>(
      x, tokens, channels, x_stride, w, kernel_size, tail, out);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (kernel_size > 1) {
    ConvTailKernel<<<Blocks(channels, 128), 128, 0, stream>>>(
        x, tokens, channels, x_stride, kernel_size, tail);
  }
  return cudaGetLastError();
}

cudaError_t SoftmaxAttention(const SoftmaxAttentionArgs& args,
                             cudaStream_t stream) {
  // The tiled kernel's grid has a row per head (at most 65535).
  if (args.tokens >= kSoftmaxTileMinRows && args.heads <= 65535) {
    return SoftmaxAttentionTiles(args, stream);
  }
  const int64_t warps = args.tokens * args.heads;
  SoftmaxAttentionKernel<<<Blocks(warps * 32, 256), 256, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t RatChunkAttention(const RatAttentionArgs& args,
                              cudaStream_t stream) {
  const int64_t warps = args.tokens * args.heads;
  RatAttentionKernel<<<Blocks(warps * 32, 256), 256, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t CausalConv1dSegments(const float* x, int64_t channels,
                                 int64_t x_stride, const float* w,
                                 int kernel_size, float* tails,
                                 const PassSegment* segments, int count,
                                 int64_t max_rows, float* out,
                                 cudaStream_t stream) {
  const dim3 grid(Blocks(max_rows * channels, 256),
                  static_cast<unsigned>(count));
  ConvSegmentsKernel<<<grid, 256, 0, stream>>>(
      x, channels, x_stride, w, kernel_size, tails, segments, out);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (kernel_size > 1) {
    const dim3 tail_grid(Blocks(channels, 128), static_cast<unsigned>(count));
    ConvTailSegmentsKernel<<<tail_grid, 128, 0, stream>>>(
        x, channels, x_stride, kernel_size, tails, segments);
  }
  return cudaGetLastError();
}

constexpr int kSsdWarpsPerBlock = 4;

cudaError_t SsdScan(const SsdArgs& args, cudaStream_t stream) {
  const dim3 grid(
      static_cast<unsigned>(args.heads),
      static_cast<unsigned>((args.head_dim + kSsdWarpsPerBlock - 1) /
                            kSsdWarpsPerBlock));
  SsdKernel<<<grid, kSsdWarpsPerBlock * 32, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t SsdScanSegments(const SsdArgs& args, const PassSegment* segments,
                            int count, cudaStream_t stream) {
  const dim3 grid(
      static_cast<unsigned>(args.heads),
      static_cast<unsigned>((args.head_dim + kSsdWarpsPerBlock - 1) /
                            kSsdWarpsPerBlock),
      static_cast<unsigned>(count));
  SsdSegmentsKernel<<<grid, kSsdWarpsPerBlock * 32, 0, stream>>>(args,
                                                                 segments);
  return cudaGetLastError();
}

cudaError_t FlashAttentionBf16(const bf16_bits* q, const bf16_bits* k,
                               const bf16_bits* v, int64_t batch,
                               int64_t tokens, int heads, float scale,
                               bf16_bits* out, cudaStream_t stream) {
  if (const cudaError_t e = cudaFuncSetAttribute(
          FlashKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
          FaTile::kBytes);
      e != cudaSuccess) {
    return e;
  }
  const dim3 grid(static_cast<unsigned>((tokens + kFlashRows - 1) / kFlashRows),
                  static_cast<unsigned>(heads), static_cast<unsigned>(batch));
  FlashKernel<<<grid, kFlashWarps * 32, FaTile::kBytes, stream>>>(
      reinterpret_cast<const bf16*>(q), reinterpret_cast<const bf16*>(k),
      reinterpret_cast<const bf16*>(v), tokens, heads, scale,
      reinterpret_cast<bf16*>(out));
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
