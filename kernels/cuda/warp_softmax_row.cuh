// WarpSoftmaxRow: one warp's online softmax attention for one query row and
// head, shared by the softmax attention kernels (sequence_cuda.cu: window,
// causal GQA, RAT chunks; paged_attention_cuda.cu: the paged KV cache),
// which differ only in where their keys are.
//
// Lane l owns dims l + 32 r below head_dim (r < kWarpRowDims, so any
// head_dim <= 128; the rest are zero and never loaded or stored). Keys are
// visited in order with the running max m and sum l:
//   s = scale · q · k,  m' = max(m, s),  l = l e^{m-m'} + e^{s-m'},
//   acc = acc e^{m-m'} + e^{s-m'} v;   out = acc / l (0 with no key).
// Every lane of the warp must visit the same keys (the dot product is a
// warp-wide shuffle sum).
#ifndef TWICE_KERNELS_CUDA_WARP_SOFTMAX_ROW_CUH_
#define TWICE_KERNELS_CUDA_WARP_SOFTMAX_ROW_CUH_

#include <cfloat>

namespace twice::kernels::cuda::launch {

inline constexpr int kWarpRowDims = 4;  // head_dim <= 128

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The online-softmax update by one key of score s (already scaled) and
// value row v, on the dims lane + 32 r of this lane: m, l and acc as at the
// top. Every lane of the warp passes the same s.
__device__ __forceinline__ void AddKeyToRow(float s, const float* v, int lane,
                                            int hd, float& m, float& l,
                                            float (&acc)[kWarpRowDims]) {
  const float m_new = fmaxf(m, s);
  const float corr = __expf(m - m_new);
  const float p = __expf(s - m_new);
  l = l * corr + p;
#pragma unroll
  for (int r = 0; r < kWarpRowDims; ++r) {
    const int e = lane + 32 * r;
    if (e < hd) acc[r] = acc[r] * corr + p * v[e];
  }
  m = m_new;
}

class WarpSoftmaxRow {
 public:
  __device__ WarpSoftmaxRow(const float* q_row, int head_dim, float scale)
      : lane_(threadIdx.x & 31), hd_(head_dim), scale_(scale) {
#pragma unroll
    for (int r = 0; r < kWarpRowDims; ++r) {
      const int e = lane_ + 32 * r;
      q_[r] = e < hd_ ? q_row[e] : 0.0f;
      acc_[r] = 0.0f;
    }
  }

  // One key row and its value row (the head's hd floats each).
  __device__ __forceinline__ void Visit(const float* k, const float* v) {
    float dot = 0.0f;
#pragma unroll
    for (int r = 0; r < kWarpRowDims; ++r) {
      const int e = lane_ + 32 * r;
      if (e < hd_) dot += q_[r] * k[e];
    }
    AddKeyToRow(WarpSum(dot) * scale_, v, lane_, hd_, m_, l_, acc_);
  }

  // The partial sums of the keys visited: out[0, hd) the weighted values
  // (not divided by the sum), out[hd] the running max, out[hd + 1] the
  // sum (-FLT_MAX and 0 with no key); combined by CombineSplits.
  __device__ void StorePartial(float* out) const {
#pragma unroll
    for (int r = 0; r < kWarpRowDims; ++r) {
      const int e = lane_ + 32 * r;
      if (e < hd_) out[e] = acc_[r];
    }
    if (lane_ == 0) {
      out[hd_] = m_;
      out[hd_ + 1] = l_;
    }
  }

  __device__ void Store(float* out_row) const {
    const float inv = l_ > 0.0f ? 1.0f / l_ : 0.0f;
#pragma unroll
    for (int r = 0; r < kWarpRowDims; ++r) {
      const int e = lane_ + 32 * r;
      if (e < hd_) out_row[e] = acc_[r] * inv;
    }
  }

 private:
  const int lane_;
  const int hd_;
  const float scale_;
  float q_[kWarpRowDims];
  float acc_[kWarpRowDims];
  float m_ = -FLT_MAX;
  float l_ = 0.0f;
};

}  // namespace twice::kernels::cuda::launch

#endif  // TWICE_KERNELS_CUDA_WARP_SOFTMAX_ROW_CUH_
