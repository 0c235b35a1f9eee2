// The Mamba-2 SSD scan in its chunked form on CUDA (equations in
// kernels/ssd_chunk_scan.h), so that one long prefill fills the GPU: the
// recurrent kernel (sequence_cuda.cu) walks the tokens one after another
// with one warp per (head, channel), ~1.5k warps for a 130M model; here
// the tokens of every chunk work at once and only the state passing
// between chunks is sequential. Three kernels per pass over a run of
// chunks, with the chunk-local states in a workspace:
//
//   states   block (chunk, head): Acum (double, as the CPU twin; a warp
//            scan), then
//            S_c = sum_s w_s x_s (x) B_s,  w_s = exp(Acum[L-1] - Acum[s]) dt_s
//            [P, N], tiles of 32 tokens in shared memory; decay_c =
//            exp(Acum[L-1]).
//   passing  thread per (head, p, n), chunks in order: the workspace's S_c
//            is replaced by the state entering chunk c, H_{c+1} = decay_c
//            H_c + S_c; the last one is the call's state.
//   outputs  block (chunk, 32-row tile, head): Y_off = exp(Acum[l]) C_l . H_c
//            and Y_diag = sum_{s <= l} (C_l . B_s) exp(Acum[l] - Acum[s])
//            dt_s x_s, tiles of 32 tokens and 32 state dims; y = Y_diag +
//            Y_off + D x.
//
// The states and outputs kernels also exist on tensor cores
// (ssd_chunked_tc_cuda.cu; the launcher's `tensor_cores`), where P and N are
// multiples of 16; the passing kernel is the same for both.
//
// Limits (the launcher's caller checks them, else the recurrent kernel
// runs): P <= 128, N <= 128, chunk <= 256.
#include <cmath>
#include <cstdint>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/ssd_chunk_acum.cuh"
#include "kernels/cuda/ssd_chunked_tc.h"

namespace twice::kernels::cuda::launch {
namespace {

constexpr int kThreads = 256;
constexpr int kTile = 32;  // tokens (and state dims) per shared tile
constexpr int kMaxDim = kSsdMaxDim;
constexpr int kMaxChunk = kSsdMaxChunk;
// Outputs per thread of the states kernel: P x N / kThreads.
constexpr int kStateAcc = kMaxDim * kMaxDim / kThreads;
// Columns p per thread of the outputs kernel (8 threads share a row).
constexpr int kRowAcc = kMaxDim / 8;

__global__ void __launch_bounds__(kThreads)
    SsdChunkStatesKernel(SsdArgs a, int64_t t_begin, int chunk, float* states,
                         float* decay) {
  __shared__ double acum[kMaxChunk];
  __shared__ float xs[kTile][kMaxDim];
  __shared__ float bs[kTile][kMaxDim];
  const int c = blockIdx.x;
  const int h = blockIdx.y;
  const int g = h / (a.heads / a.groups);
  const int P = a.head_dim, N = a.state;
  const int64_t t0 = t_begin + int64_t{c} * chunk;
  const int L = static_cast<int>(
      a.tokens - t0 < chunk ? a.tokens - t0 : static_cast<int64_t>(chunk));
  SsdChunkAcum(a, t0, L, h, acum);
  const double last = acum[L - 1];

  float acc[kStateAcc];
#pragma unroll
  for (int k = 0; k < kStateAcc; ++k) acc[k] = 0.0f;
  for (int s0 = 0; s0 < L; s0 += kTile) {
    for (int i = threadIdx.x; i < kTile * P; i += kThreads) {
      const int ss = i / P, p = i % P;
      xs[ss][p] = SsdStateInput(a, t0, s0 + ss, L, h, p, last, acum);
    }
    for (int i = threadIdx.x; i < kTile * N; i += kThreads) {
      const int ss = i / N, n = i % N, s = s0 + ss;
      bs[ss][n] =
          s < L ? a.b[(t0 + s) * a.bc_stride + int64_t{g} * N + n] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kStateAcc; ++k) {
      const int e = threadIdx.x + k * kThreads;
      if (e < P * N) {
        const int p = e / N, n = e % N;
        float sum = acc[k];
#pragma unroll 8
        for (int ss = 0; ss < kTile; ++ss) sum += xs[ss][p] * bs[ss][n];
        acc[k] = sum;
      }
    }
    __syncthreads();
  }
  float* out = states + (int64_t{c} * a.heads + h) * P * N;
#pragma unroll
  for (int k = 0; k < kStateAcc; ++k) {
    const int e = threadIdx.x + k * kThreads;
    if (e < P * N) out[e] = acc[k];
  }
  if (threadIdx.x == 0) {
    decay[int64_t{c} * a.heads + h] = static_cast<float>(exp(last));
  }
}

__global__ void SsdStatePassingKernel(int64_t chunks, int heads, int64_t pn,
                                      float* states, const float* decay,
                                      float* state) {
  const int64_t hpn = int64_t{heads} * pn;
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= hpn) return;
  const int64_t h = i / pn;
  float run = state[i];
  for (int64_t c = 0; c < chunks; ++c) {
    float* slot = states + c * hpn + i;
    const float local = *slot;
    *slot = run;  // the state entering chunk c
    run = decay[c * heads + h] * run + local;
  }
  state[i] = run;
}

// acc[j] += sum_k row[k] tile(k, p) for this thread's columns p = col + 8 j
// (< P), k over one shared tile.
template <typename Tile>
__device__ __forceinline__ void AddRowProducts(float (&acc)[kRowAcc], int col,
                                               int P, const float* row,
                                               Tile tile) {
#pragma unroll
  for (int j = 0; j < kRowAcc; ++j) {
    const int p = col + 8 * j;
    if (p < P) {
      float sum = acc[j];
#pragma unroll 8
      for (int k = 0; k < kTile; ++k) sum += row[k] * tile(k, p);
      acc[j] = sum;
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    SsdChunkOutputsKernel(SsdArgs a, int64_t t_begin, int chunk, int row_tiles,
                          const float* entering) {
  __shared__ double acum[kMaxChunk];
  __shared__ float ct[kTile][kTile + 1];    // C rows l, a tile of n
  __shared__ float bt[kTile][kTile + 1];    // B rows s, a tile of n
  __shared__ float ht[kMaxDim][kTile + 1];  // H_c [p, a tile of n]
  __shared__ float gm[kTile][kTile + 1];    // the decayed C.B tile [l, s]
  __shared__ float xt[kTile][kMaxDim];      // x rows s
  const int c = blockIdx.x / row_tiles;
  const int lt = blockIdx.x % row_tiles;
  const int h = blockIdx.y;
  const int g = h / (a.heads / a.groups);
  const int P = a.head_dim, N = a.state;
  const int64_t t0 = t_begin + int64_t{c} * chunk;
  const int L = static_cast<int>(
      a.tokens - t0 < chunk ? a.tokens - t0 : static_cast<int64_t>(chunk));
  const int l0 = lt * kTile;
  if (l0 >= L) return;  // a short last chunk has fewer row tiles
  SsdChunkAcum(a, t0, L, h, acum);

  const int r = threadIdx.x / 8;    // this thread's row l0 + r
  const int col = threadIdx.x % 8;  // and columns p = col + 8 j
  const int l = l0 + r;
  const bool row_ok = l < L;
  const float* c_rows = a.c + t0 * a.bc_stride + int64_t{g} * N;
  const float* b_rows = a.b + t0 * a.bc_stride + int64_t{g} * N;
  const float* x_rows = a.x + t0 * a.x_stride + int64_t{h} * P;
  const float* hc = entering + (int64_t{c} * a.heads + h) * P * N;

  float acc[kRowAcc];
#pragma unroll
  for (int j = 0; j < kRowAcc; ++j) acc[j] = 0.0f;

  // Y_off = exp(Acum[l]) C_l . H_c
  for (int n0 = 0; n0 < N; n0 += kTile) {
    for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
      const int rr = i / kTile, nn = i % kTile;
      ct[rr][nn] = l0 + rr < L && n0 + nn < N
                       ? c_rows[int64_t{l0 + rr} * a.bc_stride + n0 + nn]
                       : 0.0f;
    }
    for (int i = threadIdx.x; i < P * kTile; i += kThreads) {
      const int p = i / kTile, nn = i % kTile;
      ht[p][nn] = n0 + nn < N ? hc[int64_t{p} * N + n0 + nn] : 0.0f;
    }
    __syncthreads();
    AddRowProducts(acc, col, P, ct[r],
                   [&](int nn, int p) { return ht[p][nn]; });
    __syncthreads();
  }
  const float e_l = row_ok ? static_cast<float>(exp(acum[l])) : 0.0f;
#pragma unroll
  for (int j = 0; j < kRowAcc; ++j) acc[j] *= e_l;

  // Y_diag: the s tiles up to and including the row tile's own.
  for (int s0 = 0; s0 <= l0; s0 += kTile) {
    float gsum[kTile * kTile / kThreads];
#pragma unroll
    for (int q = 0; q < kTile * kTile / kThreads; ++q) gsum[q] = 0.0f;
    for (int n0 = 0; n0 < N; n0 += kTile) {
      for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
        const int rr = i / kTile, nn = i % kTile;
        const bool n_ok = n0 + nn < N;
        ct[rr][nn] = l0 + rr < L && n_ok
                         ? c_rows[int64_t{l0 + rr} * a.bc_stride + n0 + nn]
                         : 0.0f;
        bt[rr][nn] = s0 + rr < L && n_ok
                         ? b_rows[int64_t{s0 + rr} * a.bc_stride + n0 + nn]
                         : 0.0f;
      }
      __syncthreads();
#pragma unroll
      for (int q = 0; q < kTile * kTile / kThreads; ++q) {
        const int idx = threadIdx.x + q * kThreads;
        const int gl = idx / kTile, gs = idx % kTile;
        float sum = gsum[q];
#pragma unroll 8
        for (int nn = 0; nn < kTile; ++nn) sum += ct[gl][nn] * bt[gs][nn];
        gsum[q] = sum;
      }
      __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < kTile * kTile / kThreads; ++q) {
      const int idx = threadIdx.x + q * kThreads;
      const int gl = idx / kTile, gs = idx % kTile;
      const int ll = l0 + gl, s = s0 + gs;
      float v = 0.0f;
      if (s <= ll && ll < L) {
        v = gsum[q] * static_cast<float>(exp(acum[ll] - acum[s])) *
            a.dt[(t0 + s) * a.heads + h];
      }
      gm[gl][gs] = v;
    }
    for (int i = threadIdx.x; i < kTile * P; i += kThreads) {
      const int ss = i / P, p = i % P;
      xt[ss][p] =
          s0 + ss < L ? x_rows[int64_t{s0 + ss} * a.x_stride + p] : 0.0f;
    }
    __syncthreads();
    AddRowProducts(acc, col, P, gm[r],
                   [&](int ss, int p) { return xt[ss][p]; });
    __syncthreads();
  }

  if (row_ok) {
    const float d_h = a.d[h];
    const int64_t hp = int64_t{a.heads} * P;
#pragma unroll
    for (int j = 0; j < kRowAcc; ++j) {
      const int p = col + 8 * j;
      if (p < P) {
        a.y[(t0 + l) * hp + int64_t{h} * P + p] =
            acc[j] + d_h * x_rows[int64_t{l} * a.x_stride + p];
      }
    }
  }
}

}  // namespace

bool SsdChunkedSupported(int head_dim, int state, int64_t chunk) {
  return head_dim <= kMaxDim && state <= kMaxDim && chunk >= 1 &&
         chunk <= kMaxChunk;
}

cudaError_t SsdChunkedScan(const SsdArgs& args, int chunk,
                           int64_t chunks_per_pass, float* workspace,
                           float* decay, bool tensor_cores,
                           cudaStream_t stream) {
  if (tensor_cores && (!SsdTensorCoresSupported(args.head_dim, args.state) ||
                       reinterpret_cast<uintptr_t>(workspace) % 32 != 0)) {
    return cudaErrorInvalidValue;
  }
  const int64_t chunks = (args.tokens + chunk - 1) / chunk;
  const int64_t pn = int64_t{args.head_dim} * args.state;
  const int row_tiles = (chunk + kTile - 1) / kTile;
  for (int64_t first = 0; first < chunks; first += chunks_per_pass) {
    const int64_t n =
        chunks - first < chunks_per_pass ? chunks - first : chunks_per_pass;
    const int64_t t_begin = first * chunk;
    // Each launch is checked before the next: a failed one must not leave
    // the next reading an unwritten workspace into the state.
    if (tensor_cores) {
      if (cudaError_t e = SsdChunkStatesTensorCores(args, t_begin, chunk, n,
                                                    workspace, decay, stream);
          e != cudaSuccess) {
        return e;
      }
    } else {
      SsdChunkStatesKernel<<<dim3(static_cast<unsigned>(n),
                                  static_cast<unsigned>(args.heads)),
                             kThreads, 0, stream>>>(args, t_begin, chunk,
                                                    workspace, decay);
      if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    }
    const int64_t hpn = int64_t{args.heads} * pn;
    SsdStatePassingKernel<<<static_cast<unsigned>((hpn + 255) / 256), 256, 0,
                            stream>>>(n, args.heads, pn, workspace, decay,
                                      args.ssm_state);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    if (tensor_cores) {
      if (cudaError_t e = SsdChunkOutputsTensorCores(args, t_begin, chunk, n,
                                                     workspace, stream);
          e != cudaSuccess) {
        return e;
      }
    } else {
      SsdChunkOutputsKernel<<<dim3(static_cast<unsigned>(n * row_tiles),
                                   static_cast<unsigned>(args.heads)),
                              kThreads, 0, stream>>>(args, t_begin, chunk,
                                                     row_tiles, workspace);
      if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    }
  }
  return cudaSuccess;
}

}  // namespace twice::kernels::cuda::launch
