// What the chunked SSD kernels (ssd_chunked_cuda.cu, the f32 form, and
// ssd_chunked_tc_cuda.cu, the tensor-core form) share: the chunk limits,
// the running sum of dt A over a chunk's tokens that every decay factor of
// the chunk is read from, and each token's weighted input to the chunk's
// state.
#ifndef TWICE_KERNELS_CUDA_SSD_CHUNK_ACUM_CUH_
#define TWICE_KERNELS_CUDA_SSD_CHUNK_ACUM_CUH_

#include <cstdint>

#include "kernels/cuda/launch.h"

namespace twice::kernels::cuda::launch {

inline constexpr int kSsdMaxChunk = 256;  // tokens per chunk at most
inline constexpr int kSsdMaxDim = 128;    // P and N at most

// acum[l] = sum_{i <= l} dt_{t0+i} A_h in double for l < L (past L: the
// sum up to L - 1), over kSsdMaxChunk entries of shared memory. Every
// thread loads, then warp 0 scans: each lane sums a run of kSsdMaxChunk /
// 32 consecutive terms, a shuffle scan adds the runs before it. Ends
// synchronised; needs blockDim.x >= 32.
__device__ inline void SsdChunkAcum(const SsdArgs& a, int64_t t0, int L, int h,
                                    double* acum) {
  const double a_h = a.a[h];
  for (int l = threadIdx.x; l < kSsdMaxChunk; l += blockDim.x) {
    acum[l] =
        l < L ? static_cast<double>(a.dt[(t0 + l) * a.heads + h]) * a_h : 0.0;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    constexpr int kRun = kSsdMaxChunk / 32;
    const int lane = threadIdx.x;
    double run = 0.0;
    for (int i = 0; i < kRun; ++i) run += acum[lane * kRun + i];
    double before = run;  // inclusive scan of the runs, then exclusive
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const double up = __shfl_up_sync(0xffffffffu, before, o);
      if (lane >= o) before += up;
    }
    before -= run;
    for (int i = 0; i < kRun; ++i) {
      before += acum[lane * kRun + i];
      acum[lane * kRun + i] = before;
    }
  }
  __syncthreads();
}

// w_s x_s[p] with w_s = exp(Acum[L-1] - Acum[s]) dt_s (`last` =
// Acum[L-1]): what token s of the chunk starting at t0 adds to the chunk's
// state row p, through B_s; 0 past the chunk (s >= L).
__device__ inline float SsdStateInput(const SsdArgs& a, int64_t t0, int s,
                                      int L, int h, int p, double last,
                                      const double* acum) {
  if (s >= L) return 0.0f;
  const float dt = a.dt[(t0 + s) * a.heads + h];
  const float w = static_cast<float>(exp(last - acum[s])) * dt;
  return w * a.x[(t0 + s) * a.x_stride + int64_t{h} * a.head_dim + p];
}

}  // namespace twice::kernels::cuda::launch

#endif  // TWICE_KERNELS_CUDA_SSD_CHUNK_ACUM_CUH_
