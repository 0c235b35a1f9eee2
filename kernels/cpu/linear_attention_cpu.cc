// Based linear attention on CPU.
//
// Layouts: phi_q, phi_k [T, H, D]; v, y [T, H, hd]; S [H, hd, D]; z [H, D].
// Heads are independent, so both forms split heads over the pool (BLAS
// runs one thread per call inside a task).
//
// Prefill walks each head in chunks of kChunk tokens, every product a
// single-threaded BLAS GEMM on strided views (no copies):
//   Y  = Qc · S^T                       [C, hd]   (contribution of the past)
//   A  = tril(Qc · Kc^T)                [C, C]    (causal, diagonal included)
//   Y += A · Vc ;  den_i = Qc_i · z + sum_j A[i, j]
//   y  = Y / (den + eps)
//   S += Vc^T · Kc ;  z += colsum(Kc)
// Work per head and token: 4·hd·D (state read and update) + ~2·C·(D + hd)
// (the C x C block, computed whole and masked). C = 64 keeps the score block
// (16 KiB) and a chunk of S (hd x D) in L2 while the GEMMs stay large enough
// for BLAS register blocking.
//
// Step is the recurrent form (update, then read); per head it streams S
// once, fusing the update S[e] += v_e k with the read num_e = q · S[e].
#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/lane_vectors.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace twice::kernels::cpu {
namespace {

constexpr int64_t kChunk = 64;
// Floats of state below which splitting heads costs more than it saves
// (the tiny test models).
constexpr int64_t kMinParallelState = 16 * 1024;

// den_i = q_i · z + sum_{j<=i} A[i, j], then y_i /= den_i + eps; z += k_i
// afterwards for every row of the chunk.
TWICE_CPU_CLONES
void NormalizeChunk(const float* qc, const float* kc, int64_t ld_qk,
                    const float* scores, int64_t n, int64_t d, float eps,
                    float* z, float* yc, int64_t ld_v, int64_t hd) {
  for (int64_t i = 0; i < n; ++i) {
    const float* qi = qc + i * ld_qk;
    const float* ai = scores + i * n;
    float den = 0.0f;
#pragma omp simd reduction(+ : den)
    for (int64_t m = 0; m < d; ++m) den += qi[m] * z[m];
    float causal = 0.0f;
#pragma omp simd reduction(+ : causal)
    for (int64_t j = 0; j <= i; ++j) causal += ai[j];
    den += causal;
    float* yi = yc + i * ld_v;
#pragma omp simd
    for (int64_t e = 0; e < hd; ++e) yi[e] = yi[e] / (den + eps);
  }
  for (int64_t i = 0; i < n; ++i) {
    const float* ki = kc + i * ld_qk;
#pragma omp simd
    for (int64_t m = 0; m < d; ++m) z[m] += ki[m];
  }
}

void PrefillHead(const float* phi_q, const float* phi_k, const float* v,
                 int64_t tokens, int64_t heads, int64_t h, int64_t hd,
                 int64_t d, float eps, float* s, float* z, float* y) {
  const int hdi = static_cast<int>(hd);
  const int di = static_cast<int>(d);
  const int ld_qk = static_cast<int>(heads * d);
  const int ld_v = static_cast<int>(heads * hd);
  float* scores = ScratchFloats(0, kChunk * kChunk);
  for (int64_t c0 = 0; c0 < tokens; c0 += kChunk) {
    const int64_t n = std::min(kChunk, tokens - c0);
    const int ni = static_cast<int>(n);
    const float* qc = phi_q + (c0 * heads + h) * d;
    const float* kc = phi_k + (c0 * heads + h) * d;
    const float* vc = v + (c0 * heads + h) * hd;
    float* yc = y + (c0 * heads + h) * hd;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, hdi, di, 1.0f, qc,
                ld_qk, s, di, 0.0f, yc, ld_v);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, ni, di, 1.0f, qc,
                ld_qk, kc, ld_qk, 0.0f, scores, ni);
    for (int64_t i = 0; i < n; ++i) {
      std::fill(scores + i * n + i + 1, scores + (i + 1) * n, 0.0f);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, hdi, ni, 1.0f,
                scores, ni, vc, ld_v, 1.0f, yc, ld_v);
    NormalizeChunk(qc, kc, ld_qk, scores, n, d, eps, z, yc, ld_v, hd);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hdi, di, ni, 1.0f, vc,
                ld_v, kc, ld_qk, 1.0f, s, di);
  }
}

TWICE_CPU_CLONES
void StepHead(const float* q, const float* k, const float* vh, int64_t hd,
              int64_t d, float eps, float* s, float* z, float* yh) {
  float den = 0.0f;
#pragma omp simd reduction(+ : den)
  for (int64_t m = 0; m < d; ++m) {
    z[m] += k[m];
    den += q[m] * z[m];
  }
  // Each state row: updated, then read by q, 16 columns at a time (the
  // lanes' sums added pairwise, cpu/lane_vectors.h).
  for (int64_t e = 0; e < hd; ++e) {
    float* se = s + e * d;
    const float ve = vh[e];
    Floats16 acc = {};
    int64_t m = 0;
    for (; m + kLanes <= d; m += kLanes) {
      const Floats16 row = Load16(se + m) + ve * Load16(k + m);
      Store16(se + m, row);
      acc += Load16(q + m) * row;
    }
    float num = SumLanes(acc);
    for (; m < d; ++m) {
      se[m] += ve * k[m];
      num += q[m] * se[m];
    }
    yh[e] = num / (den + eps);
  }
}

}  // namespace

void LinearAttentionPrefill(const float* phi_q, const float* phi_k,
                            const float* v, int64_t tokens, int64_t heads,
                            int64_t head_dim, int64_t feature_size, float eps,
                            float* kv_state, float* k_state, float* y) {
  const int64_t hd = head_dim;
  const int64_t d = feature_size;
  auto head = [&](int64_t h) {
    PrefillHead(phi_q, phi_k, v, tokens, heads, h, hd, d, eps,
                kv_state + h * hd * d, k_state + h * d, y);
  };
  // Serial when all heads' first chunks together are a small job (single
  // tokens of a small model: the hand-off would cost more than the work).
  if (heads * hd * d * std::min(tokens, kChunk) < kMinParallelState * 8) {
    for (int64_t h = 0; h < heads; ++h) head(h);
  } else {
    ParallelFor(heads, head);
  }
}

void LinearAttentionStep(const float* phi_q, const float* phi_k, const float* v,
                         int64_t heads, int64_t head_dim, int64_t feature_size,
                         float eps, float* kv_state, float* k_state, float* y) {
  const int64_t hd = head_dim;
  const int64_t d = feature_size;
  // A head's state is hd·D floats (70 K for the 360M shape): worth a task.
  auto head = [&](int64_t h) {
    StepHead(phi_q + h * d, phi_k + h * d, v + h * hd, hd, d, eps,
             kv_state + h * hd * d, k_state + h * d, y + h * hd);
  };
  if (heads * hd * d < kMinParallelState) {
    for (int64_t h = 0; h < heads; ++h) head(h);
  } else {
    ParallelFor(heads, head);
  }
}

}  // namespace twice::kernels::cpu
