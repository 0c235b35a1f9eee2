// SSD scan on CPU (equations in kernels/ssd_chunk_scan.h).
//
// Chunked form, per call:
//   1. CB[c, g] = C_c(g) · B_c(g)^T  [Q, Q] for every chunk c and group g
//      (shared by the H / G heads of a group), split over the pool.
//   2. Per head (split over the pool), chunks in order because each one
//      starts from the state the previous one left:
//        L[l, s]  = CB[l, s] · exp(Acum[l] - Acum[s]) · Δ_s   (s <= l)
//        Y        = L · X                         GEMM [Q, Q] x [Q, P]
//        Y       += diag(exp(Acum)) C · S^T       GEMM [Q, N] x [N, P]
//        Y       += D · X
//        S        = exp(Acum[Q-1]) S + (w ⊙ X)^T B   GEMM [P, Q] x [Q, N],
//                   w_s = exp(Acum[Q-1] - Acum[s]) · Δ_s
//      X, B and C are read in place (strided); BLAS runs one thread per call
//      inside the pool's tasks (thread_pool.h), with denormals flushed
//      (flush_denormals.h).
// Every exponent is <= 0 (A < 0, Δ > 0, s <= l), so nothing overflows; the
// decay matrix factors exp(Acum[l] - Acum[s]) through the end of s's block
// of 16 (two factors <= 1), which needs one exp per (row, block).
// Acum is accumulated in double so long chunks keep their decay exact to
// float rounding.
#include "kernels/cpu/ssd_chunk_scan_cpu.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/flush_denormals.h"
#include "kernels/cpu/lane_vectors.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace twice::kernels::cpu {
namespace {

// Below this many state elements a step runs on the calling thread.
constexpr int64_t kMinParallelStepElements = 64 * 1024;
// Rows of the decay matrix are built in blocks of this many columns.
constexpr int64_t kBlock = 16;

}  // namespace

void SsdChunkScan(int64_t heads, int64_t head_dim, int64_t groups,
                  int64_t state_dim, int64_t tokens, int64_t chunk,
                  const float* x, int64_t x_stride, const float* b,
                  const float* c, int64_t bc_stride, const float* dt,
                  const float* a, const float* d, float* state, float* y) {
  const int64_t p_dim = head_dim;
  const int64_t n_dim = state_dim;
  const int64_t hp = heads * p_dim;
  const int64_t q_max = std::min(chunk, tokens);
  const int64_t chunks = (tokens + chunk - 1) / chunk;
  const int64_t heads_per_group = heads / groups;

  // 1. CB for every (chunk, group): [chunks, groups, q_max, q_max].
  std::vector<float> cb(chunks * groups * q_max * q_max);
  ParallelFor(chunks * groups, [&](int64_t task) {
    const int64_t ch = task / groups;
    const int64_t g = task % groups;
    const int64_t t0 = ch * chunk;
    const int64_t q = std::min(chunk, tokens - t0);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(q),
                static_cast<int>(q), static_cast<int>(n_dim), 1.0f,
                c + t0 * bc_stride + g * n_dim, static_cast<int>(bc_stride),
                b + t0 * bc_stride + g * n_dim, static_cast<int>(bc_stride),
                0.0f, cb.data() + task * q_max * q_max,
                static_cast<int>(q_max));
  });

  // 2. Per head, chunk after chunk.
  ParallelFor(heads, [&](int64_t h) {
    // The decay factors and the states they shrink reach denormals
    // (flush_denormals.h); BLAS reads them in place.
    const ScopedFlushDenormals flush;
    const int64_t g = h / heads_per_group;
    const double a_h = a[h];
    float* s = state + h * p_dim * n_dim;  // [P, N]
    std::vector<float> l_mat(q_max * q_max);
    std::vector<float> c_scaled(q_max * n_dim);
    std::vector<float> xw(q_max * p_dim);
    std::vector<double> acum(q_max);
    std::vector<float> col(q_max);
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t t0 = ch * chunk;
      const int64_t q = std::min(chunk, tokens - t0);
      const int qi = static_cast<int>(q);
      double run = 0.0;
      for (int64_t l = 0; l < q; ++l) {
        run += double{dt[(t0 + l) * heads + h]} * a_h;
        acum[l] = run;
      }
      const float* cb_c = cb.data() + (ch * groups + g) * q_max * q_max;
      // col[j] = exp(Acum[end of j's block] - Acum[j]) · Δ_j, so that for
      // a block J before l's own, exp(Acum[l] - Acum[j]) · Δ_j =
      // exp(Acum[l] - Acum[end of J]) · col[j]: both factors are <= 1, and
      // one exp per (row, block) replaces one per element.
      for (int64_t j = 0; j < q; ++j) {
        const int64_t end = std::min(q - 1, j / kBlock * kBlock + kBlock - 1);
        col[j] = static_cast<float>(std::exp(acum[end] - acum[j])) *
                 dt[(t0 + j) * heads + h];
      }
      for (int64_t l = 0; l < q; ++l) {
        float* row = l_mat.data() + l * q;
        const float* cb_row = cb_c + l * q_max;
        const int64_t own = l / kBlock * kBlock;
        for (int64_t jb = 0; jb < own; jb += kBlock) {
          const float rf =
              static_cast<float>(std::exp(acum[l] - acum[jb + kBlock - 1]));
#pragma omp simd
          for (int64_t j = jb; j < jb + kBlock; ++j) {
            row[j] = cb_row[j] * rf * col[j];
          }
        }
        for (int64_t j = own; j <= l; ++j) {
          row[j] = cb_row[j] * static_cast<float>(std::exp(acum[l] - acum[j])) *
                   dt[(t0 + j) * heads + h];
        }
        std::fill(row + l + 1, row + q, 0.0f);
      }
      const float* x_c = x + t0 * x_stride + h * p_dim;
      const float* b_c = b + t0 * bc_stride + g * n_dim;
      const float* c_c = c + t0 * bc_stride + g * n_dim;
      float* y_c = y + t0 * hp + h * p_dim;
      // Y = L · X
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, qi,
                  static_cast<int>(p_dim), qi, 1.0f, l_mat.data(), qi, x_c,
                  static_cast<int>(x_stride), 0.0f, y_c, static_cast<int>(hp));
      // Y += diag(exp(Acum)) C · S^T
      for (int64_t l = 0; l < q; ++l) {
        const float e = static_cast<float>(std::exp(acum[l]));
        const float* src = c_c + l * bc_stride;
        float* dst = c_scaled.data() + l * n_dim;
        for (int64_t n = 0; n < n_dim; ++n) dst[n] = e * src[n];
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qi,
                  static_cast<int>(p_dim), static_cast<int>(n_dim), 1.0f,
                  c_scaled.data(), static_cast<int>(n_dim), s,
                  static_cast<int>(n_dim), 1.0f, y_c, static_cast<int>(hp));
      // Y += D · X; w ⊙ X for the state update.
      const float d_h = d[h];
      const double last = acum[q - 1];
      for (int64_t l = 0; l < q; ++l) {
        const float* xr = x_c + l * x_stride;
        float* yr = y_c + l * hp;
        const float w = static_cast<float>(std::exp(last - acum[l])) *
                        dt[(t0 + l) * heads + h];
        float* xwr = xw.data() + l * p_dim;
        for (int64_t p = 0; p < p_dim; ++p) {
          yr[p] += d_h * xr[p];
          xwr[p] = w * xr[p];
        }
      }
      // S = exp(Acum[q-1]) S + (w ⊙ X)^T B
      cblas_sgemm(
          CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(p_dim),
          static_cast<int>(n_dim), qi, 1.0f, xw.data(), static_cast<int>(p_dim),
          b_c, static_cast<int>(bc_stride), static_cast<float>(std::exp(last)),
          s, static_cast<int>(n_dim));
    }
  });
}

namespace {

// One head's step: each state row s[p, :] = decay · s + (dt · x_p) · B,
// then y_p = s[p, :] · C + D · x_p, 16 columns at a time (the lanes' sums
// added pairwise, cpu/lane_vectors.h). Its own function so that it gets
// the CPU's widest vectors (TWICE_CPU_CLONES); the state rows stream
// through once per step.
TWICE_CPU_CLONES
void SsdStepHead(int64_t head_dim, int64_t state_dim, float delta, float decay,
                 float d, const float* x, const float* bg, const float* cg,
                 float* state, float* y) {
  for (int64_t p = 0; p < head_dim; ++p) {
    const float xv = x[p];
    const float in = delta * xv;
    float* s = state + p * state_dim;
    Floats16 acc = {};
    int64_t n = 0;
    for (; n + kLanes <= state_dim; n += kLanes) {
      const Floats16 row = decay * Load16(s + n) + in * Load16(bg + n);
      Store16(s + n, row);
      acc += row * Load16(cg + n);
    }
    float sum = SumLanes(acc);
    for (; n < state_dim; ++n) {
      s[n] = decay * s[n] + in * bg[n];
      sum += s[n] * cg[n];
    }
    y[p] = sum + d * xv;
  }
}

}  // namespace

void SsdStep(int64_t heads, int64_t head_dim, int64_t groups, int64_t state_dim,
             const float* x, const float* b, const float* c, const float* dt,
             const float* a, const float* d, float* state, float* y) {
  const int64_t heads_per_group = heads / groups;
  auto head = [&](int64_t h) {
    const ScopedFlushDenormals flush;  // decayed states, as in the scan
    const int64_t g = h / heads_per_group;
    const float delta = dt[h];
    SsdStepHead(head_dim, state_dim, delta, std::exp(delta * a[h]), d[h],
                x + h * head_dim, b + g * state_dim, c + g * state_dim,
                state + h * head_dim * state_dim, y + h * head_dim);
  };
  if (heads * head_dim * state_dim < kMinParallelStepElements) {
    for (int64_t h = 0; h < heads; ++h) head(h);
  } else {
    ParallelFor(heads, head);
  }
}

}  // namespace twice::kernels::cpu
