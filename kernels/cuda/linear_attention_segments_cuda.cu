// Causal linear attention over featurized queries and keys for every
// sequence of a prefill pass in one launch, f32: the recurrence of
// featurized_linear_attention.cu (update first, then read)
//
//   S[h] += v_t ⊗ phi_k_t,  z[h] += phi_k_t,
//   y_t[h][e] = (phi_q_t · S[h][e]) / (phi_q_t · z[h] + eps),
//
// each segment's rows continuing its slot's S [H, hd, D] and z [H, D].
//
// A pass of many short reads (questions resumed from stored documents)
// has too few tokens per sequence for the chunked form to pay, and that
// kernel's one-(head, e)-per-block layout would make B·H·hd blocks, each
// with two block-wide reductions per token. Here one block owns one
// (head, segment): all of S[h] (hd x D) lives in its threads' registers,
// kLanes consecutive lanes share a row e of S and split its D columns, so
// a token's two dot products are reductions over kLanes lanes by shuffles,
// with no barrier. Each lane group keeps its own copy of its columns of z
// (the same values in every group); group 0 writes z back once every
// group has read it (the block's one barrier). Segments have
// distinct slots (kernels/pass_segments.h), so no two blocks touch the
// same state.
#include <cstdint>

#include "kernels/cuda/launch.h"

namespace twice::kernels::cuda::launch {
namespace {

constexpr int kThreads = 256;
constexpr int kLanes = 8;                   // lanes per row of S
constexpr int kGroups = kThreads / kLanes;  // rows of S per sweep
constexpr int kRowsPerThread =              // sweeps
    kMaxSegmentHeadDim / kGroups;
constexpr int kColumnsPerLane =  // D / kLanes, rounded up
    (kMaxSegmentFeatureWidth + kLanes - 1) / kLanes;

// Sums v over the kLanes lanes of this lane's group (aligned groups of
// consecutive lanes); every lane of the group gets the total.
__device__ __forceinline__ float GroupSum(float v) {
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, o);
  }
  return v;
}

__global__ void __launch_bounds__(kThreads)
    LinearAttentionSegmentsKernel(FeaturizedLinearAttentionArgs a,
                                  const PassSegment* segments) {
  const int h = blockIdx.x;
  const PassSegment seg = segments[blockIdx.y];
  const int H = a.heads, hd = a.head_dim, D = a.feature_width;
  const int lane = threadIdx.x % kLanes, group = threadIdx.x / kLanes;
  float* s_rows = a.kv_state + (seg.slot * H + h) * int64_t{hd} * D;
  float* z_row = a.k_state + (seg.slot * H + h) * int64_t{D};

  // Rows e = group + r·kGroups, columns m = lane + j·kLanes; past hd or D
  // they stay 0 and are never stored.
  float s[kRowsPerThread][kColumnsPerLane];
  float z[kColumnsPerLane];
#pragma unroll
  for (int j = 0; j < kColumnsPerLane; ++j) {
    const int m = lane + j * kLanes;
    z[j] = m < D ? z_row[m] : 0.0f;
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int e = group + r * kGroups;
      s[r][j] = (m < D && e < hd) ? s_rows[int64_t{e} * D + m] : 0.0f;
    }
  }
  for (int64_t t = seg.first_row; t < seg.first_row + seg.rows; ++t) {
    const float* pq = a.phi_q + (t * H + h) * D;
    const float* pk = a.phi_k + (t * H + h) * D;
    const float* vt = a.v + (t * H + h) * hd;
    float v[kRowsPerThread];
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int e = group + r * kGroups;
      v[r] = e < hd ? vt[e] : 0.0f;
    }
    float num[kRowsPerThread] = {};
    float den = 0.0f;
#pragma unroll
    for (int j = 0; j < kColumnsPerLane; ++j) {
      const int m = lane + j * kLanes;
      const float k = m < D ? pk[m] : 0.0f;
      const float q = m < D ? pq[m] : 0.0f;
      z[j] += k;
      den += q * z[j];
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        s[r][j] += v[r] * k;
        num[r] += q * s[r][j];
      }
    }
    den = GroupSum(den);
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      num[r] = GroupSum(num[r]);
      const int e = group + r * kGroups;
      if (lane == 0 && e < hd) {
        a.y[(t * H + h) * hd + e] = num[r] / (den + a.eps);
      }
    }
  }
  // Every group has read z before group 0 overwrites it.
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kColumnsPerLane; ++j) {
    const int m = lane + j * kLanes;
    if (m >= D) continue;
    if (group == 0) z_row[m] = z[j];
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int e = group + r * kGroups;
      if (e < hd) s_rows[int64_t{e} * D + m] = s[r][j];
    }
  }
}

}  // namespace

cudaError_t LinearAttentionSegments(const FeaturizedLinearAttentionArgs& args,
                                    const PassSegment* segments, int count,
                                    cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(args.heads),
                  static_cast<unsigned>(count));
  LinearAttentionSegmentsKernel<<<grid, kThreads, 0, stream>>>(args, segments);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
