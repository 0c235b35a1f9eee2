// Sequence mixers on CUDA (f32 unless noted): causal short convolution,
// softmax attention over row ranges (sliding window, full causal GQA), RAT
// inter-chunk attention, the Mamba-2 SSD scan, and the bf16 flash-style
// causal attention the benchmarks use as the in-repo softmax baseline.
// Equations and layouts: kernels/cuda/cuda_ops.h (and the CPU entry points
// in kernels/ they mirror).
//
//   CausalConv1d   thread per (t, c) output; then one thread per channel
//                  shifts the tail in order (rows are read before written).
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
//                  64; S = Q K^T and O += P V with wmma (f32 accumulate),
//                  the online softmax on the CUDA cores, O kept in shared
//                  memory (f32) and rescaled per tile.
#include <cuda_bf16.h>
#include <mma.h>

#include <algorithm>
#include <cfloat>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/warp_softmax_row.cuh"

namespace twice::kernels::cuda::launch {
namespace {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

unsigned Blocks(int64_t work, int threads) {
  return static_cast<unsigned>(
      std::min<int64_t>((work + threads - 1) / threads, int64_t{1} << 20));
}

__global__ void ConvKernel(const float* x, int64_t tokens, int64_t channels,
                           int64_t x_stride, const float* w, int k,
                           const float* tail, float* out) {
  const int64_t total = tokens * channels;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / channels;
    const int64_t c = i % channels;
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int64_t u = t + j;  // row of concat(tail, x)
      const float val =
          u < k - 1 ? tail[u * channels + c] : x[(u - (k - 1)) * x_stride + c];
      acc += w[c * k + j] * val;
    }
    out[t * channels + c] = acc;
  }
}

__global__ void ConvTailKernel(const float* x, int64_t tokens, int64_t channels,
                               int64_t x_stride, int k, float* tail) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= channels) return;
  // New row r is row tokens + r of u; ascending r reads rows > r first.
  for (int r = 0; r < k - 1; ++r) {
    const int64_t u = tokens + r;
    tail[r * channels + c] =
        u < k - 1 ? tail[u * channels + c] : x[(u - (k - 1)) * x_stride + c];
  }
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

// grid (heads, ceil(P / warps)); warp w of block (h, pb) owns channel
// p = pb * warps + w of head h; lanes own n = lane + 32 r.
__global__ void SsdKernel(SsdArgs a) {
  const int warps = blockDim.x >> 5;
  const int lane = threadIdx.x & 31;
  const int h = blockIdx.x;
  const int p = blockIdx.y * warps + (threadIdx.x >> 5);
  if (p >= a.head_dim) return;
  const int g = h / (a.heads / a.groups);
  const int per = (a.state + 31) / 32;
  float* s_global = a.ssm_state + (int64_t{h} * a.head_dim + p) * a.state;
  float s[kMaxStatePerLane];
  for (int r = 0; r < per; ++r) {
    const int n = lane + 32 * r;
    s[r] = n < a.state ? s_global[n] : 0.0f;
  }
  const float a_h = a.a[h];
  const float d_h = a.d[h];
  const int64_t ch = int64_t{h} * a.head_dim + p;
  const int64_t hp = int64_t{a.heads} * a.head_dim;
  for (int64_t t = 0; t < a.tokens; ++t) {
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

// ---- flash-style causal attention, bf16, head_dim 64 ------------------------
constexpr int kFaHd = 64;
constexpr int kFaRows = 64;                               // queries per block
constexpr int kFaKeys = 64;                               // keys per tile
constexpr int kFaWarps = 4;                               // 16 query rows each
constexpr int kFaOffQ = 0;                                // bf16 [64][64]
constexpr int kFaOffK = kFaOffQ + kFaRows * kFaHd * 2;    // bf16 [64][64]
constexpr int kFaOffV = kFaOffK + kFaKeys * kFaHd * 2;    // bf16 [64][64]
constexpr int kFaOffP = kFaOffV + kFaKeys * kFaHd * 2;    // bf16 [64][64]
constexpr int kFaOffS = kFaOffP + kFaRows * kFaKeys * 2;  // f32 [64][64]
constexpr int kFaOffO = kFaOffS + kFaRows * kFaKeys * 4;  // f32 [64][64]
constexpr int kFaOffM = kFaOffO + kFaRows * kFaHd * 4;    // f32 [64] x 2
constexpr int kFaSmem = kFaOffM + 2 * kFaRows * 4;

__global__ void __launch_bounds__(kFaWarps * 32)
    FlashKernel(const bf16* q, const bf16* k, const bf16* v, int64_t tokens,
                int heads, float scale, bf16* out) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* qs = reinterpret_cast<bf16*>(smem + kFaOffQ);
  bf16* ks = reinterpret_cast<bf16*>(smem + kFaOffK);
  bf16* vs = reinterpret_cast<bf16*>(smem + kFaOffV);
  bf16* ps = reinterpret_cast<bf16*>(smem + kFaOffP);
  float* ss = reinterpret_cast<float*>(smem + kFaOffS);
  float* os = reinterpret_cast<float*>(smem + kFaOffO);
  float* ms = reinterpret_cast<float*>(smem + kFaOffM);
  float* ls = ms + kFaRows;
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int64_t qt = blockIdx.x;
  const int h = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int64_t row = int64_t{heads} * kFaHd;  // elements between tokens
  const int64_t base = b * tokens * row + int64_t{h} * kFaHd;
  const int64_t q0 = qt * kFaRows;

  for (int r = tid; r < kFaRows * kFaHd; r += kFaWarps * 32) {
    const int i = r / kFaHd;
    const int e = r % kFaHd;
    qs[r] =
        q0 + i < tokens ? q[base + (q0 + i) * row + e] : __float2bfloat16(0.0f);
    os[r] = 0.0f;
  }
  for (int r = tid; r < kFaRows; r += kFaWarps * 32) {
    ms[r] = -FLT_MAX;
    ls[r] = 0.0f;
  }
  const int64_t last_key = (q0 + kFaRows < tokens ? q0 + kFaRows : tokens) - 1;
  for (int64_t k0 = 0; k0 <= last_key; k0 += kFaKeys) {
    __syncthreads();  // previous tile's K / V reads are done
    for (int r = tid; r < kFaKeys * kFaHd; r += kFaWarps * 32) {
      const int j = r / kFaHd;
      const int e = r % kFaHd;
      const bool in = k0 + j < tokens;
      ks[r] = in ? k[base + (k0 + j) * row + e] : __float2bfloat16(0.0f);
      vs[r] = in ? v[base + (k0 + j) * row + e] : __float2bfloat16(0.0f);
    }
    __syncthreads();
    // S rows of this warp: [16, 64] = Q_w K^T.
    const int r0 = warp * 16;
    for (int tj = 0; tj < kFaKeys / 16; ++tj) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int e0 = 0; e0 < kFaHd; e0 += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, qs + r0 * kFaHd + e0, kFaHd);
        wmma::load_matrix_sync(fb, ks + tj * 16 * kFaHd + e0, kFaHd);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(ss + r0 * kFaKeys + tj * 16, acc, kFaKeys,
                              wmma::mem_row_major);
    }
    __syncwarp();
    // Online softmax per row (lanes own keys lane, lane + 32).
    for (int rr = 0; rr < 16; ++rr) {
      const int i = r0 + rr;
      const int64_t qi = q0 + i;
      float s[2];
      float mx = -FLT_MAX;
      for (int c = 0; c < 2; ++c) {
        const int j = lane + 32 * c;
        const bool ok = k0 + j <= qi && k0 + j < tokens;
        s[c] = ok ? ss[i * kFaKeys + j] * scale : -FLT_MAX;
        mx = fmaxf(mx, s[c]);
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      }
      const float m_old = ms[i];
      const float m_new = fmaxf(m_old, mx);
      float psum = 0.0f;
      for (int c = 0; c < 2; ++c) {
        const float p = s[c] == -FLT_MAX ? 0.0f : __expf(s[c] - m_new);
        psum += p;
        ps[i * kFaKeys + lane + 32 * c] = __float2bfloat16(p);
      }
      psum = WarpSum(psum);
      const float corr = m_old == -FLT_MAX ? 0.0f : __expf(m_old - m_new);
      for (int c = 0; c < 2; ++c) os[i * kFaHd + lane + 32 * c] *= corr;
      __syncwarp();
      if (lane == 0) {
        ms[i] = m_new;
        ls[i] = ls[i] * corr + psum;
      }
    }
    __syncwarp();
    // O rows of this warp += P_w V.
    for (int tj = 0; tj < kFaHd / 16; ++tj) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, os + r0 * kFaHd + tj * 16, kFaHd,
                             wmma::mem_row_major);
      for (int j0 = 0; j0 < kFaKeys; j0 += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, ps + r0 * kFaKeys + j0, kFaKeys);
        wmma::load_matrix_sync(fb, vs + j0 * kFaHd + tj * 16, kFaHd);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(os + r0 * kFaHd + tj * 16, acc, kFaHd,
                              wmma::mem_row_major);
    }
    __syncwarp();
  }
  __syncthreads();
  for (int r = tid; r < kFaRows * kFaHd; r += kFaWarps * 32) {
    const int i = r / kFaHd;
    const int e = r % kFaHd;
    if (q0 + i < tokens) {
      const float l = ls[i];
      out[base + (q0 + i) * row + e] =
          __float2bfloat16(l > 0.0f ? os[r] / l : 0.0f);
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

cudaError_t SsdScan(const SsdArgs& args, cudaStream_t stream) {
  constexpr int kWarpsPerBlock = 4;
  const dim3 grid(static_cast<unsigned>(args.heads),
                  static_cast<unsigned>((args.head_dim + kWarpsPerBlock - 1) /
                                        kWarpsPerBlock));
  SsdKernel<<<grid, kWarpsPerBlock * 32, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t FlashAttentionBf16(const bf16_bits* q, const bf16_bits* k,
                               const bf16_bits* v, int64_t batch,
                               int64_t tokens, int heads, float scale,
                               bf16_bits* out, cudaStream_t stream) {
  if (const cudaError_t e = cudaFuncSetAttribute(
          FlashKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kFaSmem);
      e != cudaSuccess) {
    return e;
  }
  const dim3 grid(static_cast<unsigned>((tokens + kFaRows - 1) / kFaRows),
                  static_cast<unsigned>(heads), static_cast<unsigned>(batch));
  FlashKernel<<<grid, kFaWarps * 32, kFaSmem, stream>>>(
      reinterpret_cast<const bf16*>(q), reinterpret_cast<const bf16*>(k),
      reinterpret_cast<const bf16*>(v), tokens, heads, scale,
      reinterpret_cast<bf16*>(out));
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
