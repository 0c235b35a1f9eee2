// Row-wise and element-wise ops on CPU: RMSNorm, SiLU gating, rotary
// embedding and the Taylor feature map. Equations on the entry points in
// kernels/. Rows are split over the pool; each row's loop is vectorised
// (TWICE_CPU_CLONES, simd.h):
//   RmsNorm   sum of squares in double (vector reduction), then
//             y = (x · rstd) · w as before
//   SiluMul   silu(g) = g / (1 + FastExp(-g)), |rel err| < 5e-7
//   Rope      inverse frequencies once per call; cos / sin in double,
//             exact at every kRopeAnchorRows-th row of a task and stepped
//             by one position's rotation (angle addition) in between, then
//             every head's halves rotated with contiguous loads
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

// Rotary angles are computed exactly (cos and sin of position · frequency,
// in double) once every this many rows and stepped by angle addition in
// between: 16x fewer trigonometric calls for q and k at every position
// (by their count, about 1 % of a Llama 360M-shape prefill; the glibc sincos
// that shows in a whole bench profile is the random weights' Box-Muller
// draw).
constexpr int64_t kRopeAnchorRows = 16;

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
  // Per pair: inverse frequency, then cos and sin of one position's angle.
  thread_local std::vector<double> freq_buffer;
  if (freq_buffer.size() < static_cast<size_t>(3 * half)) {
    freq_buffer.resize(3 * half);
  }
  double* inv_freq = freq_buffer.data();
  double* step_cos = inv_freq + half;
  double* step_sin = step_cos + half;
  for (int64_t f = 0; f < half; ++f) {
    inv_freq[f] =
        std::pow(static_cast<double>(base),
                 -2.0 * static_cast<double>(f) / static_cast<double>(head_dim));
    step_cos[f] = std::cos(inv_freq[f]);
    step_sin[f] = std::sin(inv_freq[f]);
  }
  ParallelForRange(
      rows, RowGrain(heads * head_dim), [&](int64_t begin, int64_t end) {
        float* cos_sin = ScratchFloats(0, 2 * half);
        // This row's cos and sin in double (the float copies are rounded
        // from them, so stepping does not accumulate float rounding).
        thread_local std::vector<double> angle_buffer;
        if (angle_buffer.size() < static_cast<size_t>(2 * half)) {
          angle_buffer.resize(2 * half);
        }
        double* c = angle_buffer.data();
        double* s = c + half;
        for (int64_t i = begin; i < end; ++i) {
          if ((i - begin) % kRopeAnchorRows == 0) {
            // Exact angles in double: positions reach 10^5 and beyond.
            const double pos = static_cast<double>(start_pos + i);
            for (int64_t f = 0; f < half; ++f) {
              const double angle = pos * inv_freq[f];
              c[f] = std::cos(angle);
              s[f] = std::sin(angle);
            }
          } else {
        // One position on: cos(a + w), sin(a + w) by angle addition; a
        // few ulps of double per step, re-anchored before they matter.
#pragma omp simd
            for (int64_t f = 0; f < half; ++f) {
              const double next_c = c[f] * step_cos[f] - s[f] * step_sin[f];
              s[f] = s[f] * step_cos[f] + c[f] * step_sin[f];
              c[f] = next_c;
            }
          }
          for (int64_t f = 0; f < half; ++f) {
            cos_sin[f] = static_cast<float>(c[f]);
            cos_sin[half + f] = static_cast<float>(s[f]);
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
