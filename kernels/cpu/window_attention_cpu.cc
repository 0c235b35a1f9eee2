// Sliding-window softmax attention on CPU. Query i (context index P + i)
// attends context rows [max(0, P + i - window), P + i] of k and v
// ([P + T, H, hd]); scores scaled, max-subtracted, normalised in float.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"

namespace twice::kernels::cpu {

void WindowAttention(const float* q, int64_t q_stride, const float* k,
                     const float* v, int64_t tokens, int64_t past,
                     int64_t heads, int64_t head_dim, int64_t window,
                     float scale, float* out) {
  const int64_t width = heads * head_dim;
  std::vector<float> p(std::min(window, past + tokens) + 1);
  for (int64_t i = 0; i < tokens; ++i) {
    const int64_t hi = past + i;
    const int64_t lo = std::max<int64_t>(0, hi - window);
    for (int64_t h = 0; h < heads; ++h) {
      const float* qh = q + i * q_stride + h * head_dim;
      float max_score = -INFINITY;
      for (int64_t j = lo; j <= hi; ++j) {
        const float* kj = k + j * width + h * head_dim;
        float dot = 0.0f;
        for (int64_t e = 0; e < head_dim; ++e) dot += qh[e] * kj[e];
        p[j - lo] = dot * scale;
        max_score = std::max(max_score, p[j - lo]);
      }
      float sum = 0.0f;
      for (int64_t j = lo; j <= hi; ++j) {
        p[j - lo] = std::exp(p[j - lo] - max_score);
        sum += p[j - lo];
      }
      float* o = out + i * width + h * head_dim;
      std::fill(o, o + head_dim, 0.0f);
      for (int64_t j = lo; j <= hi; ++j) {
        const float* vj = v + j * width + h * head_dim;
        const float pj = p[j - lo] / sum;
        for (int64_t e = 0; e < head_dim; ++e) o[e] += pj * vj[e];
      }
    }
  }
}

}  // namespace twice::kernels::cpu
