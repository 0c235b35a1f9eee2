// Prefix linear attention prefill on CPU.
//
// Layouts: phi_q, phi_k [T, H, D]; v, y [T, H, hd]; phi_ke [E, H, D];
// ve [E, H, hd]; S [H, hd, D]; z [H, D]. Per head, with BLAS on strided
// views (no copies):
//   S += Ve^T · Ke ;  z += colsum(Ke)          (encoder, non-causal, once)
//   then per chunk of C tokens, as the causal Based prefill:
//   Y  = Qc · S^T                       [C, hd]   (encoder + earlier tokens)
//   A  = tril(Qc · Kc^T)                [C, C]    (causal, diagonal included)
//   Y += A · Vc ;  den_i = Qc_i · z + sum_j A[i, j]
//   y  = Y · (1 / (den + eps))
//   S += Vc^T · Kc ;  z += colsum(Kc)
#include "kernels/cpu/prefix_linear_attention_cpu.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

namespace twice::kernels::cpu {
namespace {

// Tokens per chunk: large enough for BLAS efficiency, small enough that the
// C x C score block stays in cache.
constexpr int64_t kPrefixChunk = 64;

}  // namespace

void PrefixLinearAttentionPrefill(const float* phi_q, const float* phi_k,
                                  const float* v, int64_t tokens,
                                  const float* phi_k_enc, const float* v_enc,
                                  int64_t encoder_tokens, int64_t heads,
                                  int64_t head_dim, int64_t feature_size,
                                  float eps, float* kv_state, float* k_state,
                                  float* y) {
  const int64_t hd = head_dim;
  const int64_t d = feature_size;
  const int hdi = static_cast<int>(hd);
  const int di = static_cast<int>(d);
  const int ld_qk = static_cast<int>(heads * d);
  const int ld_v = static_cast<int>(heads * hd);
  std::vector<float> scores(kPrefixChunk * kPrefixChunk);
  for (int64_t h = 0; h < heads; ++h) {
    float* s = kv_state + h * hd * d;
    float* z = k_state + h * d;
    if (encoder_tokens > 0) {
      const float* ke = phi_k_enc + h * d;
      const float* ve = v_enc + h * hd;
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hdi, di,
                  static_cast<int>(encoder_tokens), 1.0f, ve, ld_v, ke, ld_qk,
                  1.0f, s, di);
      for (int64_t j = 0; j < encoder_tokens; ++j) {
        const float* kj = ke + j * ld_qk;
        for (int64_t m = 0; m < d; ++m) z[m] += kj[m];
      }
    }
    for (int64_t c0 = 0; c0 < tokens; c0 += kPrefixChunk) {
      const int64_t n = std::min(kPrefixChunk, tokens - c0);
      const int ni = static_cast<int>(n);
      const float* qc = phi_q + (c0 * heads + h) * d;
      const float* kc = phi_k + (c0 * heads + h) * d;
      const float* vc = v + (c0 * heads + h) * hd;
      float* yc = y + (c0 * heads + h) * hd;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, hdi, di, 1.0f,
                  qc, ld_qk, s, di, 0.0f, yc, ld_v);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, ni, di, 1.0f, qc,
                  ld_qk, kc, ld_qk, 0.0f, scores.data(), ni);
      for (int64_t i = 0; i < n; ++i) {
        std::fill(scores.begin() + i * n + i + 1, scores.begin() + (i + 1) * n,
                  0.0f);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, hdi, ni, 1.0f,
                  scores.data(), ni, vc, ld_v, 1.0f, yc, ld_v);
      for (int64_t i = 0; i < n; ++i) {
        const float* qi = qc + i * ld_qk;
        float den = 0.0f;
        for (int64_t m = 0; m < d; ++m) den += qi[m] * z[m];
        for (int64_t j = 0; j <= i; ++j) den += scores[i * n + j];
        const float inv = 1.0f / (den + eps);
        float* yi = yc + i * ld_v;
        for (int64_t e = 0; e < hd; ++e) yi[e] *= inv;
      }
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hdi, di, ni, 1.0f,
                  vc, ld_v, kc, ld_qk, 1.0f, s, di);
      for (int64_t i = 0; i < n; ++i) {
        const float* ki = kc + i * ld_qk;
        for (int64_t m = 0; m < d; ++m) z[m] += ki[m];
      }
    }
  }
}

}  // namespace twice::kernels::cpu
