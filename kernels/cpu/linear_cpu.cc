// Linear on CPU: y[m, n] = x[m, k] · W[n, k]^T (+ bias).
//
// More than 16 rows (prefill): BLAS SGEMM, single-threaded (blas_threads.h), on
// slices the pool hands out:
//   - by columns of y (rows of W) when there are enough, so each task's
//     B panel (its slice of W) stays private to one core;
//   - otherwise (narrow outputs, e.g. the linear-attention q / k
//     projections, n = H·F = 256) by rows of x.
// About two slices per thread: dynamic hand-out balances a core shared with
// other work, at the price of packing x once per slice.
//
// One row (decode): a GEMV, memory-bound (it streams W once). It runs our
// own kernel, eight rows of W at a time against x (L1-resident) with eight
// vector accumulators, so eight sequential streams are in flight per
// thread; in 360M-shape decode it measured 9-16 % faster than OpenBLAS's
// sgemv (1-2 threads) and level with BLIS's on the same weights. Its slices
// are small (~256 KiB of W) and handed out dynamically, so a thread that
// loses its core to another process holds up little.
//
// A few rows (batched decode, m <= 16) take the same path: each slice of W
// is read from memory once and dotted with every row of x while in L1.
//
// Problems too small to amortise a hand-off (the tiny test models) run on
// the calling thread.
#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemv_tasks.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace twice::kernels::cpu {
namespace {

// Below ~1 MFLOP (GEMM) or 256 KiB of weights (GEMV) one thread is faster
// than waking the others.
constexpr double kMinParallelFlops = 1e6;
constexpr int64_t kMinParallelGemvElements = 64 * 1024;
// Up to this many rows of x (batched decode) W is streamed once by our own
// kernel. Measured single-threaded on 40 [4096, 1024] matrices: OpenBLAS's
// SGEMM reads W at 3.6-4.7 GB/s for m = 2..16 (its GEMV: ~17); this kernel
// at 15 GB/s (m = 2), 11 (m = 4), 7.4 (m = 8), 4.2 (m = 16), where it is
// compute-bound and level with SGEMM, which takes over above.
constexpr int64_t kMaxSmallM = 16;
// Smallest slice worth a BLAS call of its own: narrower slices re-pack x
// too often (GEMM) or make the GEMV too short to stream well.
constexpr int64_t kMinColumns = 128;
constexpr int64_t kMinRows = 64;
// Slices are multiples of this many outputs, so every task's part of W and
// y starts on a cache line and BLAS sees whole register blocks.
constexpr int64_t kAlign = 16;

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

// y[r] = W[r, :] · x (+ bias[r]) for rows [r0, r1).
TWICE_CPU_CLONES
void GemvRows(const float* w, const float* x, int64_t k, const float* bias,
              int64_t r0, int64_t r1, float* y) {
  int64_t r = r0;
  for (; r + 8 <= r1; r += 8) {
    const float* w0 = w + r * k;
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3, a4, a5, a6, a7)
    for (int64_t j = 0; j < k; ++j) {
      const float xj = x[j];
      a0 += w0[j] * xj;
      a1 += w0[k + j] * xj;
      a2 += w0[2 * k + j] * xj;
      a3 += w0[3 * k + j] * xj;
      a4 += w0[4 * k + j] * xj;
      a5 += w0[5 * k + j] * xj;
      a6 += w0[6 * k + j] * xj;
      a7 += w0[7 * k + j] * xj;
    }
    const float sums[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    for (int i = 0; i < 8; ++i) {
      y[r + i] = bias != nullptr ? sums[i] + bias[r + i] : sums[i];
    }
  }
  for (; r < r1; ++r) {
    const float* wr = w + r * k;
    float a = 0;
#pragma omp simd reduction(+ : a)
    for (int64_t j = 0; j < k; ++j) a += wr[j] * x[j];
    y[r] = bias != nullptr ? a + bias[r] : a;
  }
}

// y[i, r] = W[r, :] · x[i, :] (+ bias[r]) for i < m <= kMaxSmallM and rows
// [r0, r1): four rows of W at a time are read from memory once and, while in
// L1, dotted with every row of x, two rows of x per pass (4 x 2 register
// block: six loads feed eight multiply-adds).
TWICE_CPU_CLONES
void SmallMRows(const float* w, const float* x, int64_t m, int64_t k, int64_t n,
                const float* bias, int64_t r0, int64_t r1, float* y) {
  auto store = [&](int64_t i, int64_t r, float v) {
    y[i * n + r] = bias != nullptr ? v + bias[r] : v;
  };
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const float* w0 = w + r * k;
    const float* w1 = w0 + k;
    const float* w2 = w1 + k;
    const float* w3 = w2 + k;
    int64_t i = 0;
    for (; i + 2 <= m; i += 2) {
      const float* xa = x + i * k;
      const float* xb = xa + k;
      float a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3, b0, b1, b2, b3)
      for (int64_t j = 0; j < k; ++j) {
        const float u = xa[j], v = xb[j];
        a0 += w0[j] * u;
        a1 += w1[j] * u;
        a2 += w2[j] * u;
        a3 += w3[j] * u;
        b0 += w0[j] * v;
        b1 += w1[j] * v;
        b2 += w2[j] * v;
        b3 += w3[j] * v;
      }
      store(i, r, a0), store(i, r + 1, a1), store(i, r + 2, a2);
      store(i, r + 3, a3), store(i + 1, r, b0), store(i + 1, r + 1, b1);
      store(i + 1, r + 2, b2), store(i + 1, r + 3, b3);
    }
    for (; i < m; ++i) {
      const float* xa = x + i * k;
      float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
      for (int64_t j = 0; j < k; ++j) {
        const float u = xa[j];
        a0 += w0[j] * u;
        a1 += w1[j] * u;
        a2 += w2[j] * u;
        a3 += w3[j] * u;
      }
      store(i, r, a0), store(i, r + 1, a1), store(i, r + 2, a2);
      store(i, r + 3, a3);
    }
  }
  for (; r < r1; ++r) {
    const float* wr = w + r * k;
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      float a = 0;
#pragma omp simd reduction(+ : a)
      for (int64_t j = 0; j < k; ++j) a += wr[j] * xi[j];
      store(i, r, a);
    }
  }
}

}  // namespace

void LinearPanelF32(const float* x, int64_t m, int64_t k, const float* w,
                    int64_t rows, int64_t ldy, const float* bias, float* y) {
  if (m == 1) {
    GemvRows(w, x, k, bias, 0, rows, y);
  } else if (m <= kMaxSmallM) {
    SmallMRows(w, x, m, k, ldy, bias, 0, rows, y);
  } else {
    float beta = 0.0f;
    if (bias != nullptr) {
      for (int64_t i = 0; i < m; ++i) std::copy(bias, bias + rows, y + i * ldy);
      beta = 1.0f;
    }
    const int ki = static_cast<int>(k);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m),
                static_cast<int>(rows), ki, 1.0f, x, ki, w, ki, beta, y,
                static_cast<int>(ldy));
  }
}

void Linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n,
            const float* bias, float* y) {
  const int ki = static_cast<int>(k);
  const int ni = static_cast<int>(n);
  if (m <= kMaxSmallM) {
    auto rows_of_w = [&](int64_t r0, int64_t r1) {
      if (m == 1) {
        GemvRows(w, x, k, bias, r0, r1, y);
      } else {
        SmallMRows(w, x, m, k, n, bias, r0, r1, y);
      }
    };
    if (n * k < kMinParallelGemvElements || DefaultPool().threads() == 1) {
      rows_of_w(0, n);
      return;
    }
    const int64_t rows =
        RoundUp(std::max<int64_t>(kGemvTaskElements / k, 8), 8);  // per task
    ParallelFor((n + rows - 1) / rows, [&](int64_t t) {
      rows_of_w(t * rows, std::min(n, (t + 1) * rows));
    });
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
