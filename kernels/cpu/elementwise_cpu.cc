// Row-wise and element-wise ops on CPU: RMSNorm, SiLU gating, rotary
// embedding and the Taylor feature map. Plain loops; equations on the entry
// points in kernels/.
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"

namespace twice::kernels::cpu {

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* w,
             float eps, float* y) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* xi = x + i * dim;
    float* yi = y + i * dim;
    double sum_sq = 0.0;
    for (int64_t j = 0; j < dim; ++j) sum_sq += double{xi[j]} * xi[j];
    const float rstd = static_cast<float>(
        1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps));
    for (int64_t j = 0; j < dim; ++j) yi[j] = (xi[j] * rstd) * w[j];
  }
}

void SiluMul(const float* gate, int64_t gate_stride, const float* mult,
             int64_t mult_stride, int64_t rows, int64_t cols, float* out) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* g = gate + i * gate_stride;
    const float* a = mult + i * mult_stride;
    float* o = out + i * cols;
    for (int64_t j = 0; j < cols; ++j) {
      o[j] = g[j] / (1.0f + std::exp(-g[j])) * a[j];
    }
  }
}

void RopeRotateHalf(float* x, int64_t rows, int64_t row_stride, int64_t heads,
                    int64_t head_dim, int64_t start_pos, float base) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < rows; ++i) {
    const double pos = static_cast<double>(start_pos + i);
    for (int64_t f = 0; f < half; ++f) {
      const double inv_freq = std::pow(
          static_cast<double>(base),
          -2.0 * static_cast<double>(f) / static_cast<double>(head_dim));
      const double angle = pos * inv_freq;
      const float c = static_cast<float>(std::cos(angle));
      const float s = static_cast<float>(std::sin(angle));
      for (int64_t h = 0; h < heads; ++h) {
        float* xh = x + i * row_stride + h * head_dim;
        const float x1 = xh[f];
        const float x2 = xh[half + f];
        xh[f] = x1 * c - x2 * s;
        xh[half + f] = x2 * c + x1 * s;
      }
    }
  }
}

void TaylorFeatureMap(const float* x, int64_t rows, int64_t feature_dim,
                      float* out) {
  const int64_t f = feature_dim;
  const int64_t d = 1 + f + f * f;
  // Divisors as upstream writes them: x / F^(1/4) and x x^T / (sqrt 2 sqrt F).
  const float rd = std::sqrt(std::sqrt(static_cast<float>(f)));
  const float rrd = std::sqrt(2.0f) * std::sqrt(static_cast<float>(f));
  for (int64_t i = 0; i < rows; ++i) {
    const float* xi = x + i * f;
    float* o = out + i * d;
    o[0] = 1.0f;
    for (int64_t m = 0; m < f; ++m) o[1 + m] = xi[m] / rd;
    float* quad = o + 1 + f;
    for (int64_t m = 0; m < f; ++m) {
      for (int64_t n = 0; n < f; ++n) quad[m * f + n] = xi[m] * xi[n] / rrd;
    }
  }
}

}  // namespace twice::kernels::cpu
