// Sliding-window softmax attention on CPU. Query i (context index P + i)
// attends context rows [max(0, P + i - window), P + i] of k and v
// ([P + T, H, hd]).
//
// Work is cut into (head, block of kQueryBlock queries) tasks on the pool.
// A block of queries [i0, i1) sees the key band [lo, P + i1 - 1] with
// lo = max(0, P + i0 - window), nk <= (i1 - i0) + window keys, so each task
// is two single-threaded BLAS GEMMs on strided views:
//   S = Qb · Kband^T          [nq, nk]   (then scaled)
//   P = band-masked row softmax of S     (entries outside a row's window 0)
//   out_b = P · Vband          [nq, hd]
// The masked corners cost (nq + window) / (window + 1) extra work (1.5x at
// window 128, blocks of 64), far cheaper than per-query dot-product loops.
// Softmax in float with max subtraction and FastExp (simd.h).
#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace twice::kernels::cpu {
namespace {

constexpr int64_t kQueryBlock = 64;
// Below ~1 MFLOP of attention the pool hand-off is not worth it.
constexpr double kMinParallelFlops = 1e6;

// Row r of scores [nq, nk] belongs to context index ctx0 + r and keeps
// columns [max(0, ctx0 + r - window) - lo, ctx0 + r - lo].
TWICE_CPU_CLONES
void BandSoftmax(float* scores, int64_t nq, int64_t nk, int64_t lo,
                 int64_t ctx0, int64_t window, float scale) {
  for (int64_t r = 0; r < nq; ++r) {
    float* row = scores + r * nk;
    const int64_t ci = ctx0 + r;
    const int64_t a = std::max<int64_t>(0, ci - window) - lo;
    const int64_t b = ci - lo;  // inclusive
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t j = a; j <= b; ++j) {
      row[j] *= scale;
      mx = std::max(mx, row[j]);
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = a; j <= b; ++j) {
      row[j] = FastExp(row[j] - mx);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t j = a; j <= b; ++j) row[j] *= inv;
    std::fill(row, row + a, 0.0f);
    std::fill(row + b + 1, row + nk, 0.0f);
  }
}

}  // namespace

void WindowAttention(const float* q, int64_t q_stride, const float* k,
                     const float* v, int64_t tokens, int64_t past,
                     int64_t heads, int64_t head_dim, int64_t window,
                     float scale, float* out) {
  const int64_t width = heads * head_dim;
  const int64_t bq = std::min(kQueryBlock, tokens);
  const int64_t blocks = (tokens + bq - 1) / bq;
  const int hdi = static_cast<int>(head_dim);
  const int ld = static_cast<int>(width);
  auto task = [&](int64_t t) {
    const int64_t h = t % heads;
    const int64_t i0 = (t / heads) * bq;
    const int64_t nq = std::min(bq, tokens - i0);
    const int64_t ctx0 = past + i0;
    const int64_t lo = std::max<int64_t>(0, ctx0 - window);
    const int64_t nk = ctx0 + nq - lo;
    float* scores = ScratchFloats(0, nq * nk);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(nq),
                static_cast<int>(nk), hdi, 1.0f,
                q + i0 * q_stride + h * head_dim, static_cast<int>(q_stride),
                k + lo * width + h * head_dim, ld, 0.0f, scores,
                static_cast<int>(nk));
    BandSoftmax(scores, nq, nk, lo, ctx0, window, scale);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(nq),
                hdi, static_cast<int>(nk), 1.0f, scores, static_cast<int>(nk),
                v + lo * width + h * head_dim, ld, 0.0f,
                out + i0 * width + h * head_dim, ld);
  };
  const double flops = 4.0 * static_cast<double>(tokens) * width *
                       static_cast<double>(std::min(window, past + tokens) + 1);
  if (flops < kMinParallelFlops) {
    for (int64_t t = 0; t < blocks * heads; ++t) task(t);
  } else {
    ParallelFor(blocks * heads, task);
  }
}

}  // namespace twice::kernels::cpu
