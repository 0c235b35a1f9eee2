// Depthwise causal conv on CPU. u = concat(tail [K-1, C], x [T, C]);
// out[t, c] = sum_j w[c, j] · u[t + j, c]; tail <- last K-1 rows of u.
//
// The taps are transposed once per call to wt [K, C] (the caller's scratch),
// so the inner loop runs over channels with unit stride for every operand
// and vectorises. Tokens are split over the pool (outputs are independent);
// the tail is updated afterwards, without allocating.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace twice::kernels::cpu {
namespace {

TWICE_CPU_CLONES
void ConvTokens(const float* x, int64_t x_stride, const float* tail,
                int64_t begin, int64_t end, int64_t channels, const float* wt,
                int64_t kernel_size, float* out) {
  const int64_t k1 = kernel_size - 1;
  for (int64_t t = begin; t < end; ++t) {
    float* o = out + t * channels;
    for (int64_t c = 0; c < channels; ++c) o[c] = 0.0f;
    for (int64_t j = 0; j < kernel_size; ++j) {
      // Row t + j of u: a tail row or input row t + j - (K-1).
      const int64_t r = t + j;
      const float* u = r < k1 ? tail + r * channels : x + (r - k1) * x_stride;
      const float* wj = wt + j * channels;
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c) o[c] += wj[c] * u[c];
    }
  }
}

}  // namespace

void CausalConv1d(const float* x, int64_t tokens, int64_t channels,
                  int64_t x_stride, const float* w, int64_t kernel_size,
                  float* tail, float* out) {
  const int64_t k1 = kernel_size - 1;
  float* wt = ScratchFloats(1, kernel_size * channels);
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t j = 0; j < kernel_size; ++j) {
      wt[j * channels + c] = w[c * kernel_size + j];
    }
  }
  ParallelForRange(tokens, std::max<int64_t>(1, 8192 / channels),
                   [&](int64_t begin, int64_t end) {
                     ConvTokens(x, x_stride, tail, begin, end, channels, wt,
                                kernel_size, out);
                   });
  // New tail = u rows [T, T + K-1): the last K-1 inputs, or, for T < K-1,
  // the old tail shifted up by T followed by all T inputs.
  const int64_t from_tail = std::max<int64_t>(0, k1 - tokens);
  if (from_tail > 0) {
    std::memmove(tail, tail + tokens * channels,
                 sizeof(float) * from_tail * channels);
  }
  for (int64_t r = from_tail; r < k1; ++r) {
    const float* src = x + (tokens - k1 + r) * x_stride;
    std::copy(src, src + channels, tail + r * channels);
  }
}

}  // namespace twice::kernels::cpu
