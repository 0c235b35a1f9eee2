// Depthwise causal conv on CPU. u = concat(tail [K-1, C], x [T, C]);
// out[t, c] = sum_j w[c, j] · u[t + j, c]; tail <- last K-1 rows of u.
#include <vector>

#include "kernels/cpu/cpu_kernels.h"

namespace twice::kernels::cpu {

void CausalConv1d(const float* x, int64_t tokens, int64_t channels,
                  int64_t x_stride, const float* w, int64_t kernel_size,
                  float* tail, float* out) {
  const int64_t k1 = kernel_size - 1;
  // Row r of u: r < k1 is a tail row, otherwise input row r - k1.
  auto row = [&](int64_t r) -> const float* {
    return r < k1 ? tail + r * channels : x + (r - k1) * x_stride;
  };
  for (int64_t t = 0; t < tokens; ++t) {
    float* o = out + t * channels;
    for (int64_t c = 0; c < channels; ++c) o[c] = 0.0f;
    for (int64_t j = 0; j < kernel_size; ++j) {
      const float* u = row(t + j);
      for (int64_t c = 0; c < channels; ++c)
        o[c] += w[c * kernel_size + j] * u[c];
    }
  }
  // New tail rows come from u rows [T, T + k1); read them before overwriting
  // the old tail, which they may include when T < K-1.
  std::vector<float> next(k1 * channels);
  for (int64_t r = 0; r < k1; ++r) {
    const float* u = row(tokens + r);
    for (int64_t c = 0; c < channels; ++c) next[r * channels + c] = u[c];
  }
  for (int64_t i = 0; i < k1 * channels; ++i) tail[i] = next[i];
}

}  // namespace twice::kernels::cpu
