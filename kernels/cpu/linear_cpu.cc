// Linear on CPU: y[m, n] = x[m, k] · W[n, k]^T (+ bias), BLAS split over the
// pool.
//
// BLAS runs single-threaded (blas_threads.h); the pool splits the output:
//   - by columns of y (rows of W) when there are enough: each task streams
//     only its own slice of W, which is what a memory-bound decode GEMV
//     needs and keeps a prefill GEMM's B panel private to one core;
//   - otherwise (narrow outputs, e.g. the linear-attention q / k
//     projections, n = H·F = 256) by rows of x.
// A single row uses GEMV, which OpenBLAS runs faster than a one-row GEMM.
// Problems too small to amortise a hand-off (the tiny test models) run on
// the calling thread.
#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/thread_pool.h"

namespace twice::kernels::cpu {
namespace {

// Below ~1 MFLOP (GEMM) or 256 KiB of weights (GEMV) one thread is faster
// than waking the others.
constexpr double kMinParallelFlops = 1e6;
constexpr int64_t kMinParallelGemvElements = 64 * 1024;
// Smallest slice worth a BLAS call of its own: narrower slices re-pack x
// too often (GEMM) or make the GEMV too short to stream well.
constexpr int64_t kMinColumns = 128;
constexpr int64_t kMinRows = 64;
// Slices are multiples of this many outputs, so every task's part of W and
// y starts on a cache line and BLAS sees whole register blocks.
constexpr int64_t kAlign = 16;

int64_t RoundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// Splits [0, total) into about `tasks` aligned slices of >= `min` and runs
// fn(begin, end) on the pool.
template <typename Fn>
void SplitRange(int64_t total, int64_t min, Fn fn) {
  const int threads = DefaultPool().threads();
  // Two slices per thread balance a shared machine where one core may be
  // busy with someone else's work.
  const int64_t want = std::min<int64_t>(2 * threads, total / min);
  if (threads == 1 || want <= 1) {
    fn(0, total);
    return;
  }
  const int64_t step = RoundUp((total + want - 1) / want, kAlign);
  const int64_t tasks = (total + step - 1) / step;
  ParallelFor(tasks, [&](int64_t t) {
    const int64_t begin = t * step;
    fn(begin, std::min(total, begin + step));
  });
}

}  // namespace

void Linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n,
            const float* bias, float* y) {
  const int ki = static_cast<int>(k);
  const int ni = static_cast<int>(n);
  if (m == 1) {
    auto gemv = [&](int64_t begin, int64_t end) {
      float beta = 0.0f;
      if (bias != nullptr) {
        std::copy(bias + begin, bias + end, y + begin);
        beta = 1.0f;
      }
      cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(end - begin),
                  ki, 1.0f, w + begin * k, ki, x, 1, beta, y + begin, 1);
    };
    if (n * k < kMinParallelGemvElements) {
      gemv(0, n);
    } else {
      SplitRange(n, kMinRows, gemv);
    }
    return;
  }
  // y[rows, cols] for a block of rows of x and a block of rows of W.
  auto gemm = [&](int64_t row0, int64_t row1, int64_t col0, int64_t col1) {
    float beta = 0.0f;
    if (bias != nullptr) {
      for (int64_t i = row0; i < row1; ++i) {
        std::copy(bias + col0, bias + col1, y + i * n + col0);
      }
      beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans,
                static_cast<int>(row1 - row0), static_cast<int>(col1 - col0),
                ki, 1.0f, x + row0 * k, ki, w + col0 * k, ki, beta,
                y + row0 * n + col0, ni);
  };
  const double flops = 2.0 * static_cast<double>(m) * n * k;
  const int threads = DefaultPool().threads();
  if (flops < kMinParallelFlops || threads == 1) {
    gemm(0, m, 0, n);
  } else if (n >= threads * kMinColumns) {
    SplitRange(n, kMinColumns,
               [&](int64_t c0, int64_t c1) { gemm(0, m, c0, c1); });
  } else {
    SplitRange(m, kMinRows,
               [&](int64_t r0, int64_t r1) { gemm(r0, r1, 0, n); });
  }
}

}  // namespace twice::kernels::cpu
