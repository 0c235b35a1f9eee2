// Row-wise and element-wise ops on CPU: RMSNorm, SiLU gating, rotary
// embedding and the Taylor feature map. Equations on the entry points in
// kernels/. Rows are split over the pool; each row's loop is vectorised
// (TWICE_CPU_CLONES, simd.h):
//   RmsNorm   sum of squares in double (vector reduction), then
//             y = (x · rstd) · w as before
//   SiluMul   silu(g) = g / (1 + FastExp(-g)), |rel err| < 5e-7
//   Rope      inverse frequencies once per call; cos / sin per (row, pair)
//             in double, then every head's halves rotated with contiguous
//             loads
//   Taylor    [1, x / F^(1/4), x_m x_n / (sqrt 2 sqrt F)] row by row
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace twice::kernels::cpu {
namespace {

// Elements per pool task: enough to amortise the hand-off (~µs).
constexpr int64_t kGrainElements = 16 * 1024;

int64_t RowGrain(int64_t row_elements) {
  return std::max<int64_t>(1,
                           kGrainElements / std::max<int64_t>(1, row_elements));
}

TWICE_CPU_CLONES
void RmsNormRows(const float* x, int64_t begin, int64_t end, int64_t dim,
                 const float* w, float eps, float* y) {
  for (int64_t i = begin; i < end; ++i) {
    const float* xi = x + i * dim;
    float* yi = y + i * dim;
    double sum_sq = 0.0;
#pragma omp simd reduction(+ : sum_sq)
    for (int64_t j = 0; j < dim; ++j) sum_sq += double{xi[j]} * xi[j];
    const float rstd = static_cast<float>(
        1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps));
    for (int64_t j = 0; j < dim; ++j) yi[j] = (xi[j] * rstd) * w[j];
  }
}

TWICE_CPU_CLONES
void SiluMulRows(const float* gate, int64_t gate_stride, const float* mult,
                 int64_t mult_stride, int64_t begin, int64_t end, int64_t cols,
                 float* out) {
  for (int64_t i = begin; i < end; ++i) {
    const float* g = gate + i * gate_stride;
    const float* a = mult + i * mult_stride;
    float* o = out + i * cols;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      o[j] = g[j] / (1.0f + FastExp(-g[j])) * a[j];
    }
  }
}

// cos_sin: [half] cosines then [half] sines of this row's angles.
TWICE_CPU_CLONES
void RotateRow(float* row, int64_t heads, int64_t head_dim,
               const float* cos_sin) {
  const int64_t half = head_dim / 2;
  const float* c = cos_sin;
  const float* s = cos_sin + half;
  for (int64_t h = 0; h < heads; ++h) {
    float* x1 = row + h * head_dim;
    float* x2 = x1 + half;
#pragma omp simd
    for (int64_t f = 0; f < half; ++f) {
      const float a = x1[f];
      const float b = x2[f];
      x1[f] = a * c[f] - b * s[f];
      x2[f] = b * c[f] + a * s[f];
    }
  }
}

TWICE_CPU_CLONES
void TaylorRows(const float* x, int64_t begin, int64_t end, int64_t f,
                float* out) {
  const int64_t d = 1 + f + f * f;
  // Divisors as upstream writes them: x / F^(1/4) and x x^T / (sqrt 2 sqrt
  // F).
  const float rd = std::sqrt(std::sqrt(static_cast<float>(f)));
  const float rrd = std::sqrt(2.0f) * std::sqrt(static_cast<float>(f));
  for (int64_t i = begin; i < end; ++i) {
    const float* xi = x + i * f;
    float* o = out + i * d;
    o[0] = 1.0f;
    for (int64_t m = 0; m < f; ++m) o[1 + m] = xi[m] / rd;
    float* quad = o + 1 + f;
    for (int64_t m = 0; m < f; ++m) {
      const float xm = xi[m];
      float* qm = quad + m * f;
#pragma omp simd
      for (int64_t n = 0; n < f; ++n) qm[n] = xm * xi[n] / rrd;
    }
  }
}

}  // namespace

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* w,
             float eps, float* y) {
  ParallelForRange(rows, RowGrain(dim), [&](int64_t begin, int64_t end) {
    RmsNormRows(x, begin, end, dim, w, eps, y);
  });
}

void SiluMul(const float* gate, int64_t gate_stride, const float* mult,
             int64_t mult_stride, int64_t rows, int64_t cols, float* out) {
  ParallelForRange(rows, RowGrain(cols), [&](int64_t begin, int64_t end) {
    SiluMulRows(gate, gate_stride, mult, mult_stride, begin, end, cols, out);
  });
}

void RopeRotateHalf(float* x, int64_t rows, int64_t row_stride, int64_t heads,
                    int64_t head_dim, int64_t start_pos, float base) {
  const int64_t half = head_dim / 2;
  thread_local std::vector<double> inv_freq_buffer;
  if (inv_freq_buffer.size() < static_cast<size_t>(half)) {
    inv_freq_buffer.resize(half);
  }
  const double* inv_freq = inv_freq_buffer.data();
  for (int64_t f = 0; f < half; ++f) {
    inv_freq_buffer[f] =
        std::pow(static_cast<double>(base),
                 -2.0 * static_cast<double>(f) / static_cast<double>(head_dim));
  }
  ParallelForRange(
      rows, RowGrain(heads * head_dim), [&](int64_t begin, int64_t end) {
        float* cos_sin = ScratchFloats(0, 2 * half);
        for (int64_t i = begin; i < end; ++i) {
          // Angles in double: positions reach 10^5 and beyond.
          const double pos = static_cast<double>(start_pos + i);
          for (int64_t f = 0; f < half; ++f) {
            const double angle = pos * inv_freq[f];
            cos_sin[f] = static_cast<float>(std::cos(angle));
            cos_sin[half + f] = static_cast<float>(std::sin(angle));
          }
          RotateRow(x + i * row_stride, heads, head_dim, cos_sin);
        }
      });
}

void TaylorFeatureMap(const float* x, int64_t rows, int64_t feature_dim,
                      float* out) {
  const int64_t d = 1 + feature_dim + feature_dim * feature_dim;
  ParallelForRange(rows, RowGrain(d), [&](int64_t begin, int64_t end) {
    TaylorRows(x, begin, end, feature_dim, out);
  });
}

}  // namespace twice::kernels::cpu
