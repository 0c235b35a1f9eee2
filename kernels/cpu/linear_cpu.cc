// Linear on CPU: one BLAS call. y[m, n] = x[m, k] · W[n, k]^T (+ bias).
// A single row (decode) uses GEMV, which OpenBLAS runs faster than a
// one-row GEMM.
#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"

namespace twice::kernels::cpu {

void Linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n,
            const float* bias, float* y) {
  float beta = 0.0f;
  if (bias != nullptr) {
    for (int64_t i = 0; i < m; ++i) std::copy(bias, bias + n, y + i * n);
    beta = 1.0f;
  }
  if (m == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(n),
                static_cast<int>(k), 1.0f, w, static_cast<int>(k), x, 1, beta,
                y, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, x,
              static_cast<int>(k), w, static_cast<int>(k), beta, y,
              static_cast<int>(n));
}

}  // namespace twice::kernels::cpu
