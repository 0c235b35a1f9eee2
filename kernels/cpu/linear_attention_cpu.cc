// Based linear attention on CPU.
//
// Layouts: phi_q, phi_k [T, H, D]; v, y [T, H, hd]; S [H, hd, D]; z [H, D].
// Prefill walks each head in chunks of kChunk tokens with BLAS (strided
// views, no copies):
//   Y  = Qc · S^T                       [C, hd]   (contribution of the past)
//   A  = tril(Qc · Kc^T)                [C, C]    (causal, diagonal included)
//   Y += A · Vc ;  den_i = Qc_i · z + sum_j A[i, j]
//   y  = Y / (den + eps)
//   S += Vc^T · Kc ;  z += colsum(Kc)
// Step is the recurrent form: update, then read.
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"

namespace twice::kernels::cpu {
namespace {

// Tokens per chunk: large enough for BLAS efficiency, small enough that the
// C x C score block stays in cache.
constexpr int64_t kChunk = 64;

}  // namespace

void LinearAttentionPrefill(const float* phi_q, const float* phi_k,
                            const float* v, int64_t tokens, int64_t heads,
                            int64_t head_dim, int64_t feature_size, float eps,
                            float* kv_state, float* k_state, float* y) {
  const int64_t hd = head_dim;
  const int64_t d = feature_size;
  const int ld_qk = static_cast<int>(heads * d);
  const int ld_v = static_cast<int>(heads * hd);
  std::vector<float> scores(kChunk * kChunk);
  for (int64_t h = 0; h < heads; ++h) {
    float* s = kv_state + h * hd * d;
    float* z = k_state + h * d;
    for (int64_t c0 = 0; c0 < tokens; c0 += kChunk) {
      const int64_t n = std::min(kChunk, tokens - c0);
      const int ni = static_cast<int>(n);
      const float* qc = phi_q + (c0 * heads + h) * d;
      const float* kc = phi_k + (c0 * heads + h) * d;
      const float* vc = v + (c0 * heads + h) * hd;
      float* yc = y + (c0 * heads + h) * hd;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni,
                  static_cast<int>(hd), static_cast<int>(d), 1.0f, qc, ld_qk, s,
                  static_cast<int>(d), 0.0f, yc, ld_v);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, ni,
                  static_cast<int>(d), 1.0f, qc, ld_qk, kc, ld_qk, 0.0f,
                  scores.data(), ni);
      for (int64_t i = 0; i < n; ++i) {
        std::fill(scores.begin() + i * n + i + 1, scores.begin() + (i + 1) * n,
                  0.0f);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni,
                  static_cast<int>(hd), ni, 1.0f, scores.data(), ni, vc, ld_v,
                  1.0f, yc, ld_v);
      for (int64_t i = 0; i < n; ++i) {
        const float* qi = qc + i * ld_qk;
        float den = 0.0f;
        for (int64_t m = 0; m < d; ++m) den += qi[m] * z[m];
        for (int64_t j = 0; j <= i; ++j) den += scores[i * n + j];
        float* yi = yc + i * ld_v;
        for (int64_t e = 0; e < hd; ++e) yi[e] = yi[e] / (den + eps);
      }
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(hd),
                  static_cast<int>(d), ni, 1.0f, vc, ld_v, kc, ld_qk, 1.0f, s,
                  static_cast<int>(d));
      for (int64_t i = 0; i < n; ++i) {
        const float* ki = kc + i * ld_qk;
        for (int64_t m = 0; m < d; ++m) z[m] += ki[m];
      }
    }
  }
}

void LinearAttentionStep(const float* phi_q, const float* phi_k, const float* v,
                         int64_t heads, int64_t head_dim, int64_t feature_size,
                         float eps, float* kv_state, float* k_state, float* y) {
  const int64_t hd = head_dim;
  const int64_t d = feature_size;
  for (int64_t h = 0; h < heads; ++h) {
    const float* q = phi_q + h * d;
    const float* k = phi_k + h * d;
    const float* vh = v + h * hd;
    float* s = kv_state + h * hd * d;
    float* z = k_state + h * d;
    float* yh = y + h * hd;
    float den = 0.0f;
    for (int64_t m = 0; m < d; ++m) {
      z[m] += k[m];
      den += q[m] * z[m];
    }
    for (int64_t e = 0; e < hd; ++e) {
      float* se = s + e * d;
      float num = 0.0f;
      for (int64_t m = 0; m < d; ++m) {
        se[m] += vh[e] * k[m];
        num += q[m] * se[m];
      }
      yh[e] = num / (den + eps);
    }
  }
}

}  // namespace twice::kernels::cpu
