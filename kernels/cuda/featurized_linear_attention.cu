// Causal linear attention over featurized queries/keys on CUDA, f32, any
// head_dim hd and feature width D <= kMaxFeatureWidth: the GPU twin of
// kernels/prefix_linear_attention.h (and, with E = 0, of
// kernels/linear_attention.h Prefill and Step), for the engine's own layers
// whose feature map ran as a separate op.
//
//   S[h] += sum_{j<E} ve_j ⊗ phi_ke_j,  z[h] += sum_{j<E} phi_ke_j (encoder)
//   per token t:  S[h] += v_t ⊗ phi_k_t,  z[h] += phi_k_t      (update first)
//                 y_t[h][e] = (phi_q_t · S[h][e]) / (phi_q_t · z[h] + eps)
//
// Layouts: phi_q, phi_k [T, H, D]; v, y [T, H, hd]; phi_ke [E, H, D];
// ve [E, H, hd]; kv_state [H, hd, D]; k_state [H, D].
// One block per (h, e): row e of S[h] and a private copy of z[h] live in
// registers, thread i owning columns m = i + j·blockDim; each token costs
// two block reductions. No block writes z: every block must start from the
// call's z, and blocks of one grid run in any order, so a block that wrote
// z back could be read by one that starts after it (its keys counted
// twice). A second kernel, queued after the first on the same stream, adds
// the call's keys to z. This is the recurrent form (work O(T·D·hd), T
// sequential steps); the fused chunked bf16 kernel of based_cuda.cu is the
// fast path for the Based shapes.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/launch.h"

namespace twice::kernels::cuda::launch {
namespace {

constexpr int kThreads = 256;
constexpr int kColumnsPerThread = kMaxFeatureWidth / kThreads;

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sums a and b over the block; every thread gets both totals. `scratch`
// holds 2 * (kThreads / 32) floats.
__device__ __forceinline__ void BlockSum2(float& a, float& b, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  a = WarpSum(a);
  b = WarpSum(b);
  if (lane == 0) {
    scratch[warp] = a;
    scratch[kThreads / 32 + warp] = b;
  }
  __syncthreads();
  a = 0.0f;
  b = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) {
    a += scratch[w];
    b += scratch[kThreads / 32 + w];
  }
  __syncthreads();  // scratch is reused by the next token
}

__global__ void __launch_bounds__(kThreads)
    FeaturizedLinearAttentionKernel(FeaturizedLinearAttentionArgs args) {
  const int h = blockIdx.x, e = blockIdx.y;
  const int H = args.heads, hd = args.head_dim, D = args.feature_width;
  float s[kColumnsPerThread], z[kColumnsPerThread];
  float* s_row = args.kv_state + (int64_t{h} * hd + e) * D;
  const float* z_row = args.k_state + int64_t{h} * D;
#pragma unroll
  for (int j = 0; j < kColumnsPerThread; ++j) {
    const int m = threadIdx.x + j * kThreads;
    s[j] = m < D ? s_row[m] : 0.0f;
    z[j] = m < D ? z_row[m] : 0.0f;
  }
  for (int64_t t = 0; t < args.encoder_tokens; ++t) {
    const float* pk = args.phi_k_enc + (t * H + h) * D;
    const float ve = args.v_enc[(t * H + h) * hd + e];
#pragma unroll
    for (int j = 0; j < kColumnsPerThread; ++j) {
      const int m = threadIdx.x + j * kThreads;
      if (m < D) {
        s[j] += ve * pk[m];
        z[j] += pk[m];
      }
    }
  }
  __shared__ float scratch[2 * (kThreads / 32)];
  for (int64_t t = 0; t < args.tokens; ++t) {
    const float* pq = args.phi_q + (t * H + h) * D;
    const float* pk = args.phi_k + (t * H + h) * D;
    const float v = args.v[(t * H + h) * hd + e];
    float num = 0.0f, den = 0.0f;
#pragma unroll
    for (int j = 0; j < kColumnsPerThread; ++j) {
      const int m = threadIdx.x + j * kThreads;
      if (m < D) {
        s[j] += v * pk[m];
        z[j] += pk[m];
        num += pq[m] * s[j];
        den += pq[m] * z[j];
      }
    }
    BlockSum2(num, den, scratch);
    if (threadIdx.x == 0) {
      args.y[(t * H + h) * hd + e] = num / (den + args.eps);
    }
  }
#pragma unroll
  for (int j = 0; j < kColumnsPerThread; ++j) {
    const int m = threadIdx.x + j * kThreads;
    if (m < D) s_row[m] = s[j];
  }
}

// z[h] += sum of the call's encoder and causal keys; one block per head,
// thread i owning columns i + j·blockDim (the same order of additions as a
// block of the kernel above).
__global__ void __launch_bounds__(kThreads)
    KeySumKernel(FeaturizedLinearAttentionArgs args) {
  const int h = blockIdx.x;
  const int H = args.heads, D = args.feature_width;
  float* z_row = args.k_state + int64_t{h} * D;
  for (int m = threadIdx.x; m < D; m += kThreads) {
    float z = z_row[m];
    for (int64_t t = 0; t < args.encoder_tokens; ++t) {
      z += args.phi_k_enc[(t * H + h) * D + m];
    }
    for (int64_t t = 0; t < args.tokens; ++t) {
      z += args.phi_k[(t * H + h) * D + m];
    }
    z_row[m] = z;
  }
}

}  // namespace

cudaError_t FeaturizedLinearAttention(const FeaturizedLinearAttentionArgs& args,
                                      cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(args.heads),
                  static_cast<unsigned>(args.head_dim));
  FeaturizedLinearAttentionKernel<<<grid, kThreads, 0, stream>>>(args);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  KeySumKernel<<<static_cast<unsigned>(args.heads), kThreads, 0, stream>>>(
      args);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
