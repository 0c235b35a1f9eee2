// The chunked SSD's states and outputs kernels on tensor cores (wmma
// m16n16k8, TF32 inputs, f32 accumulation). Equations as in
// ssd_chunked_cuda.cu (and kernels/ssd_chunk_scan.h); every sum over
// tokens or state dims there is a matrix product here:
//
//   states   block (chunk, head), 8 warps over the 16 x 16 tiles of
//            S_c [P, N] = (w ∘ X)^T B, w_s = exp(Acum[L-1] - Acum[s]) dt_s,
//            tokens in shared tiles of 32 (rows zero past the chunk);
//            the tiles go straight to the workspace.
//   outputs  block (chunk, 64 rows l, head), warp per 16 rows, Y [16, P] in
//            accumulators:
//            Y_off  = (e^{Acum[l]} C_l) . H_c — H_c read from the workspace;
//            Y_diag = sum over tiles of 32 positions s up to the block's
//                     last row: G = C_l . B_s (a [16, 32] product), then
//                     M = G e^{Acum[l] - Acum[s]} (0 where s > l) in
//                     shared memory, Y += M (dt ∘ X_s);
//            then y = Y + D x through shared memory (rows past the chunk
//            are not written).
//
// Why TF32 rather than bf16: x, B, C are f32 activations and the decayed
// C.B weights span many orders of magnitude; TF32 keeps bf16's range with
// f16's 10-bit mantissa, and its products still run on the tensor cores
// (the f32 form runs on the CUDA cores, bound by shared-memory reads).
//
// Shared rows are padded by kPad floats: every fragment pointer stays 32-byte
// aligned (wmma's requirement) and consecutive rows start on other banks.
#include <mma.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/ssd_chunk_acum.cuh"
#include "kernels/cuda/ssd_chunked_tc.h"

namespace twice::kernels::cuda::launch {
namespace {

namespace wmma = nvcuda::wmma;
using Tf32 = wmma::precision::tf32;
using RowA = wmma::fragment<wmma::matrix_a, 16, 16, 8, Tf32, wmma::row_major>;
using ColA = wmma::fragment<wmma::matrix_a, 16, 16, 8, Tf32, wmma::col_major>;
using RowB = wmma::fragment<wmma::matrix_b, 16, 16, 8, Tf32, wmma::row_major>;
using ColB = wmma::fragment<wmma::matrix_b, 16, 16, 8, Tf32, wmma::col_major>;
using Acc = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

constexpr int kPad = 4;
constexpr int kMaxTiles = kSsdMaxDim / 16;  // 16-wide tiles of P or N

// A fragment of f32 values rounded to TF32 (the mma reads only those bits).
template <typename Fragment>
__device__ __forceinline__ void LoadTf32(Fragment& f, const float* p,
                                         unsigned ld) {
  wmma::load_matrix_sync(f, p, ld);
#pragma unroll
  for (int i = 0; i < f.num_elements; ++i) {
    f.x[i] = wmma::__float_to_tf32(f.x[i]);
  }
}

__device__ __forceinline__ int ChunkLength(const SsdArgs& a, int64_t t0,
                                           int chunk) {
  return static_cast<int>(a.tokens - t0 < chunk ? a.tokens - t0
                                                : static_cast<int64_t>(chunk));
}

// ---- states
// ------------------------------------------------------------------
constexpr int kStateWarps = 8;
constexpr int kStateTokens = 32;
// S tiles per warp at most: (128 / 16)^2 over 8 warps.
constexpr int kStateTilesPerWarp = kMaxTiles * kMaxTiles / kStateWarps;

size_t StatesSharedBytes(int P, int N) {
  return kSsdMaxChunk * sizeof(double) +
         sizeof(float) * kStateTokens * ((P + kPad) + (N + kPad));
}

__global__ void __launch_bounds__(kStateWarps * 32)
    SsdChunkStatesTcKernel(SsdArgs a, int64_t t_begin, int chunk, float* states,
                           float* decay) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int P = a.head_dim, N = a.state;
  const int ldx = P + kPad, ldb = N + kPad;
  double* acum = reinterpret_cast<double*>(smem);
  float* xs = reinterpret_cast<float*>(smem + kSsdMaxChunk * sizeof(double));
  float* bs = xs + kStateTokens * ldx;  // [kStateTokens][ldb]
  const int c = blockIdx.x;
  const int h = blockIdx.y;
  const int g = h / (a.heads / a.groups);
  const int64_t t0 = t_begin + int64_t{c} * chunk;
  const int L = ChunkLength(a, t0, chunk);
  SsdChunkAcum(a, t0, L, h, acum);
  const double last = acum[L - 1];
  const int warp = threadIdx.x >> 5;
  const int n_tiles = N / 16;
  const int tiles = (P / 16) * n_tiles;

  Acc acc[kStateTilesPerWarp];
#pragma unroll
  for (int i = 0; i < kStateTilesPerWarp; ++i)
    wmma::fill_fragment(acc[i], 0.0f);
  for (int s0 = 0; s0 < L; s0 += kStateTokens) {
    __syncthreads();  // the previous tile is read
    for (int i = threadIdx.x; i < kStateTokens * P; i += blockDim.x) {
      const int ss = i / P, p = i % P;
      xs[ss * ldx + p] = SsdStateInput(a, t0, s0 + ss, L, h, p, last, acum);
    }
    for (int i = threadIdx.x; i < kStateTokens * N; i += blockDim.x) {
      const int ss = i / N, n = i % N, s = s0 + ss;
      bs[ss * ldb + n] =
          s < L ? a.b[(t0 + s) * a.bc_stride + int64_t{g} * N + n] : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < kStateTokens; k += 8) {
#pragma unroll
      for (int i = 0; i < kStateTilesPerWarp; ++i) {
        const int t = warp + kStateWarps * i;
        if (t < tiles) {  // warp-uniform
          // (w ∘ X)^T: element (p, s) of the tile at xs[s][p], column-major.
          ColA xa;
          LoadTf32(xa, xs + k * ldx + (t / n_tiles) * 16, ldx);
          RowB bb;
          LoadTf32(bb, bs + k * ldb + (t % n_tiles) * 16, ldb);
          wmma::mma_sync(acc[i], xa, bb, acc[i]);
        }
      }
    }
  }
  float* out = states + (int64_t{c} * a.heads + h) * P * N;
#pragma unroll
  for (int i = 0; i < kStateTilesPerWarp; ++i) {
    const int t = warp + kStateWarps * i;
    if (t < tiles) {
      wmma::store_matrix_sync(out + (t / n_tiles) * 16 * N + (t % n_tiles) * 16,
                              acc[i], N, wmma::mem_row_major);
    }
  }
  if (threadIdx.x == 0) {
    decay[int64_t{c} * a.heads + h] = static_cast<float>(exp(last));
  }
}

// ---- outputs
// -----------------------------------------------------------------
constexpr int kOutWarps = 4;
constexpr int kOutRows = 16 * kOutWarps;  // rows l per block
constexpr int kOutKeys = 32;              // positions s per shared tile
constexpr int kLdm = kOutKeys + kPad;     // a warp's M rows

// Byte offsets of the outputs kernel's shared memory: acum | C rows [64][N
// + kPad] | B rows [32][N + kPad] and dt ∘ X rows [32][P + kPad], later the
// block's Y [64][P + kPad] | each warp's M [16][kLdm].
struct OutputsLayout {
  size_t c_rows, tiles, y, m, bytes;
  __host__ __device__ OutputsLayout(int P, int N) {
    c_rows = kSsdMaxChunk * sizeof(double);
    tiles = c_rows + sizeof(float) * kOutRows * (N + kPad);
    y = tiles;
    const size_t tile_bytes =
        sizeof(float) * kOutKeys * ((N + kPad) + (P + kPad));
    const size_t y_bytes = sizeof(float) * kOutRows * (P + kPad);
    m = tiles + (tile_bytes > y_bytes ? tile_bytes : y_bytes);
    bytes = m + sizeof(float) * kOutRows * kLdm;
  }
};

// Rows l0 .. l0 + 63 of the chunk's C into c_rows, times e^{Acum[l]} when
// `decayed`; zero past the chunk.
__device__ __forceinline__ void LoadCRows(const SsdArgs& a, const float* c_in,
                                          int l0, int L, const double* acum,
                                          bool decayed, float* c_rows) {
  const int N = a.state, ldc = N + kPad;
  for (int i = threadIdx.x; i < kOutRows * N; i += blockDim.x) {
    const int rr = i / N, n = i % N, l = l0 + rr;
    float v = 0.0f;
    if (l < L) {
      v = c_in[int64_t{l} * a.bc_stride + n];
      if (decayed) v *= static_cast<float>(exp(acum[l]));
    }
    c_rows[rr * ldc + n] = v;
  }
}

__global__ void __launch_bounds__(kOutWarps * 32)
    SsdChunkOutputsTcKernel(SsdArgs a, int64_t t_begin, int chunk,
                            int row_tiles, const float* entering) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int P = a.head_dim, N = a.state;
  const int ldc = N + kPad, ldb = N + kPad, ldx = P + kPad, ldy = P + kPad;
  const OutputsLayout layout(P, N);
  double* acum = reinterpret_cast<double*>(smem);
  float* c_rows = reinterpret_cast<float*>(smem + layout.c_rows);
  float* b_rows = reinterpret_cast<float*>(smem + layout.tiles);
  float* x_rows = b_rows + kOutKeys * ldb;  // dt_s x_s
  float* y_rows = reinterpret_cast<float*>(smem + layout.y);
  const int c = blockIdx.x / row_tiles;
  const int lt = blockIdx.x % row_tiles;
  const int h = blockIdx.y;
  const int g = h / (a.heads / a.groups);
  const int64_t t0 = t_begin + int64_t{c} * chunk;
  const int L = ChunkLength(a, t0, chunk);
  const int l0 = lt * kOutRows;
  if (l0 >= L) return;  // a short last chunk has fewer row tiles
  SsdChunkAcum(a, t0, L, h, acum);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r0 = warp * 16;  // this warp's rows l0 + r0 .. l0 + r0 + 15
  const int p_tiles = P / 16;
  const float* c_in = a.c + t0 * a.bc_stride + int64_t{g} * N;
  const float* b_in = a.b + t0 * a.bc_stride + int64_t{g} * N;
  const float* x_in = a.x + t0 * a.x_stride + int64_t{h} * P;
  const float* hc = entering + (int64_t{c} * a.heads + h) * P * N;
  float* m = reinterpret_cast<float*>(smem + layout.m) + r0 * kLdm;

  Acc acc[kMaxTiles];
#pragma unroll
  for (int i = 0; i < kMaxTiles; ++i) wmma::fill_fragment(acc[i], 0.0f);

  // Y_off: H_c [P, N] row-major is the column-major [N, P] operand.
  LoadCRows(a, c_in, l0, L, acum, /*decayed=*/true, c_rows);
  __syncthreads();
  for (int n0 = 0; n0 < N; n0 += 8) {
    RowA ca;
    LoadTf32(ca, c_rows + r0 * ldc + n0, ldc);
#pragma unroll
    for (int tp = 0; tp < kMaxTiles; ++tp) {
      if (tp < p_tiles) {
        ColB hb;
        LoadTf32(hb, hc + tp * 16 * N + n0, N);
        wmma::mma_sync(acc[tp], ca, hb, acc[tp]);
      }
    }
  }
  __syncthreads();  // every warp has read the decayed rows
  LoadCRows(a, c_in, l0, L, acum, /*decayed=*/false, c_rows);

  // Y_diag, tiles of positions up to the block's last row.
  const int last_row = (l0 + kOutRows < L ? l0 + kOutRows : L) - 1;
  for (int s0 = 0; s0 <= last_row; s0 += kOutKeys) {
    __syncthreads();  // C rows written, the previous tile read
    for (int i = threadIdx.x; i < kOutKeys * N; i += blockDim.x) {
      const int ss = i / N, n = i % N, s = s0 + ss;
      b_rows[ss * ldb + n] = s < L ? b_in[int64_t{s} * a.bc_stride + n] : 0.0f;
    }
    for (int i = threadIdx.x; i < kOutKeys * P; i += blockDim.x) {
      const int ss = i / P, p = i % P, s = s0 + ss;
      x_rows[ss * ldx + p] = s < L ? a.dt[(t0 + s) * a.heads + h] *
                                         x_in[int64_t{s} * a.x_stride + p]
                                   : 0.0f;
    }
    __syncthreads();
    // Every row of this warp before the tile: M is 0 (warp-uniform).
    if (s0 > l0 + r0 + 15) continue;
    // G = C_l . B_s: B rows [32][N] row-major are the column-major [N, 32].
    Acc gram[kOutKeys / 16];
#pragma unroll
    for (int j = 0; j < kOutKeys / 16; ++j) wmma::fill_fragment(gram[j], 0.0f);
    for (int n0 = 0; n0 < N; n0 += 8) {
      RowA ca;
      LoadTf32(ca, c_rows + r0 * ldc + n0, ldc);
#pragma unroll
      for (int j = 0; j < kOutKeys / 16; ++j) {
        ColB bb;
        LoadTf32(bb, b_rows + j * 16 * ldb + n0, ldb);
        wmma::mma_sync(gram[j], ca, bb, gram[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < kOutKeys / 16; ++j) {
      wmma::store_matrix_sync(m + j * 16, gram[j], kLdm, wmma::mem_row_major);
    }
    __syncwarp();
    // The decay between s and l, in double as the f32 kernel's, and the
    // causal mask (exp only where s <= l, so it never overflows).
    for (int i = lane; i < 16 * kOutKeys; i += 32) {
      const int rr = i / kOutKeys, ss = i % kOutKeys;
      const int l = l0 + r0 + rr, s = s0 + ss;
      float& v = m[rr * kLdm + ss];
      v = s <= l && l < L ? v * static_cast<float>(exp(acum[l] - acum[s]))
                          : 0.0f;
    }
    __syncwarp();
    for (int k = 0; k < kOutKeys; k += 8) {
      RowA ma;
      LoadTf32(ma, m + k, kLdm);
#pragma unroll
      for (int tp = 0; tp < kMaxTiles; ++tp) {
        if (tp < p_tiles) {
          RowB xb;
          LoadTf32(xb, x_rows + k * ldx + tp * 16, ldx);
          wmma::mma_sync(acc[tp], ma, xb, acc[tp]);
        }
      }
    }
  }

  __syncthreads();  // the last tile is read: Y takes its place
#pragma unroll
  for (int tp = 0; tp < kMaxTiles; ++tp) {
    if (tp < p_tiles) {
      wmma::store_matrix_sync(y_rows + r0 * ldy + tp * 16, acc[tp], ldy,
                              wmma::mem_row_major);
    }
  }
  __syncthreads();
  const float d_h = a.d[h];
  const int64_t hp = int64_t{a.heads} * P;
  for (int i = threadIdx.x; i < kOutRows * P; i += blockDim.x) {
    const int rr = i / P, p = i % P, l = l0 + rr;
    if (l < L) {
      a.y[(t0 + l) * hp + int64_t{h} * P + p] =
          y_rows[rr * ldy + p] + d_h * x_in[int64_t{l} * a.x_stride + p];
    }
  }
}

}  // namespace

bool SsdTensorCoresSupported(int head_dim, int state) {
  return head_dim >= 16 && head_dim <= kSsdMaxDim && head_dim % 16 == 0 &&
         state >= 16 && state <= kSsdMaxDim && state % 16 == 0;
}

cudaError_t SsdChunkStatesTensorCores(const SsdArgs& args, int64_t t_begin,
                                      int chunk, int64_t chunks, float* states,
                                      float* decay, cudaStream_t stream) {
  const size_t bytes = StatesSharedBytes(args.head_dim, args.state);
  SsdChunkStatesTcKernel<<<dim3(static_cast<unsigned>(chunks),
                                static_cast<unsigned>(args.heads)),
                           kStateWarps * 32, bytes, stream>>>(
      args, t_begin, chunk, states, decay);
  return cudaGetLastError();
}

cudaError_t SsdChunkOutputsTensorCores(const SsdArgs& args, int64_t t_begin,
                                       int chunk, int64_t chunks,
                                       const float* entering,
                                       cudaStream_t stream) {
  const OutputsLayout layout(args.head_dim, args.state);
  // Past 48 KiB a kernel must ask for its shared memory. The limit is one
  // per kernel and device, shared by every thread launching it, so it is
  // always the largest shape's (P = N = 128: 77 KiB): a smaller one set
  // by one call could fail another's launch in between.
  static const int kLargest =
      static_cast<int>(OutputsLayout(kSsdMaxDim, kSsdMaxDim).bytes);
  if (const cudaError_t e = cudaFuncSetAttribute(
          SsdChunkOutputsTcKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
          kLargest);
      e != cudaSuccess) {
    return e;
  }
  const int row_tiles = (chunk + kOutRows - 1) / kOutRows;
  SsdChunkOutputsTcKernel<<<dim3(static_cast<unsigned>(chunks * row_tiles),
                                 static_cast<unsigned>(args.heads)),
                            kOutWarps * 32, layout.bytes, stream>>>(
      args, t_begin, chunk, row_tiles, entering);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
