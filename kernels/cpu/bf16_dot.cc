#include "kernels/cpu/bf16_dot.h"

#include <algorithm>

#include "kernels/cpu/gemv_tasks.h"
#include "kernels/cpu/x86_intrinsics.h"
#include "kernels/dtype.h"

namespace twice::kernels::cpu {

void Bf16Inputs::Pack(const float* x, int64_t m, int64_t k,
                      int64_t row_multiple) {
  rows_ = m;
  k_ = k;
  stride_ = (k + 31) / 32 * 32;
  const int64_t padded_rows =
      (m + row_multiple - 1) / row_multiple * row_multiple;
  if (values_.size() < static_cast<size_t>(padded_rows * stride_)) {
    values_.resize(static_cast<size_t>(padded_rows * stride_));
  }
  std::fill(values_.begin() + m * stride_,
            values_.begin() + padded_rows * stride_, uint16_t{0});
  for (int64_t i = 0; i < m; ++i) {
    uint16_t* out = values_.data() + i * stride_;
    for (int64_t j = 0; j < k; ++j) {
      out[j] = static_cast<uint16_t>(RoundedBf16Bits(x[i * k + j]) >> 16);
    }
    std::fill(out + k, out + stride_, uint16_t{0});
  }
}

#if defined(__x86_64__)

namespace {

#define TWICE_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,avx512bf16")))

TWICE_AVX512_BF16 inline __m512bh LoadBf16x32(const uint16_t* p) {
  return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
}
TWICE_AVX512_BF16 inline __m512bh LoadBf16Tail(const uint16_t* p,
                                               __mmask32 mask) {
  return reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(mask, p));
}

// Blocks of four rows of k weights that make about kGemvPrefetchBytes
// (gemv_tasks.h); at least one.
inline int64_t PrefetchBlocks(int64_t k) {
  const int64_t block_bytes = 4 * k * 2;
  return std::max<int64_t>(
      1, (kGemvPrefetchBytes + block_bytes / 2) / block_bytes);
}

inline float Finish(const float* bias, int64_t r, float dot) {
  return bias != nullptr ? dot + bias[r] : dot;
}

// Four rows of W (w[0..3], k each) times M packed inputs: per row and
// input two accumulators (even and odd 32-element chunks), then the tail
// into the first. With kPrefetch, the same columns `blocks_ahead` blocks
// of four rows on (PrefetchBlocks: about 16 KiB) are prefetched into L2
// meanwhile: the four rows are four short streams (1.5 KiB each at k =
// 768) that the hardware prefetcher follows late. With it a batch of 4
// inputs read the LM head of the 130M shape in about 0.55x the time on
// an AMD EPYC (bench/lowp_linear_bench); on an Intel Xeon 48 KiB ahead
// into L1 (eight blocks, as before) streamed 24-25 GB/s where 16 KiB into
// L2 streams 27.7 (gemv_tasks.h). Callers turn it off for the last blocks
// of their range, whose next rows are another task's.
template <int M, bool kPrefetch>
TWICE_AVX512_BF16 inline void FourRowsBf16Dot(const uint16_t* const* w,
                                              int64_t k, int64_t blocks_ahead,
                                              const uint16_t* const* xs,
                                              __m512 (*sums)[4]) {
  const int64_t body64 = k / 64 * 64;
  const int64_t body32 = k / 32 * 32;
  const int64_t tail = k - body32;
  const auto tail_mask = static_cast<__mmask32>((uint64_t{1} << tail) - 1u);
  const int64_t ahead = blocks_ahead * 4 * k;  // in elements
  __m512 a[M][4], c[M][4];
#pragma GCC unroll 2
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) a[i][q] = c[i][q] = _mm512_setzero_ps();
  }
  int64_t j = 0;
  for (; j < body64; j += 64) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      if constexpr (kPrefetch) {
        _mm_prefetch(reinterpret_cast<const char*>(w[q] + ahead + j),
                     _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(w[q] + ahead + j + 32),
                     _MM_HINT_T1);
      }
      const __m512bh wa = LoadBf16x32(w[q] + j);
      const __m512bh wc = LoadBf16x32(w[q] + j + 32);
#pragma GCC unroll 2
      for (int i = 0; i < M; ++i) {
        a[i][q] = _mm512_dpbf16_ps(a[i][q], wa, LoadBf16x32(xs[i] + j));
        c[i][q] = _mm512_dpbf16_ps(c[i][q], wc, LoadBf16x32(xs[i] + j + 32));
      }
    }
  }
  for (; j < body32; j += 32) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const __m512bh wa = LoadBf16x32(w[q] + j);
#pragma GCC unroll 2
      for (int i = 0; i < M; ++i) {
        a[i][q] = _mm512_dpbf16_ps(a[i][q], wa, LoadBf16x32(xs[i] + j));
      }
    }
  }
  if (tail != 0) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const __m512bh wa = LoadBf16Tail(w[q] + j, tail_mask);
#pragma GCC unroll 2
      for (int i = 0; i < M; ++i) {
        a[i][q] = _mm512_dpbf16_ps(a[i][q], wa, LoadBf16x32(xs[i] + j));
      }
    }
  }
#pragma GCC unroll 2
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) sums[i][q] = _mm512_add_ps(a[i][q], c[i][q]);
  }
}

// One row of W times one packed input, one accumulator (the rows a range
// leaves after its groups of four).
TWICE_AVX512_BF16 inline float OneRowBf16Dot(const uint16_t* w0, int64_t k,
                                             const uint16_t* xb) {
  const int64_t body32 = k / 32 * 32;
  const int64_t tail = k - body32;
  __m512 a0 = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j < body32; j += 32) {
    a0 = _mm512_dpbf16_ps(a0, LoadBf16x32(w0 + j), LoadBf16x32(xb + j));
  }
  if (tail != 0) {
    const auto tail_mask = static_cast<__mmask32>((uint64_t{1} << tail) - 1u);
    a0 = _mm512_dpbf16_ps(a0, LoadBf16Tail(w0 + j, tail_mask),
                          LoadBf16x32(xb + j));
  }
  return _mm512_reduce_add_ps(a0);
}

}  // namespace

// Two inputs per pass over each four rows (the four rows stay in L1 for
// the next two).
TWICE_AVX512_BF16 void Bf16DotRows(const uint16_t* w, const Bf16Inputs& x,
                                   const float* bias, int64_t r0, int64_t r1,
                                   float* y, int64_t ldy) {
  const int64_t k = x.k();
  const int64_t m = x.rows();
  const int64_t blocks_ahead = PrefetchBlocks(k);
  __m512 sums[2][4];
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint16_t* rows[4] = {w + r * k, w + (r + 1) * k, w + (r + 2) * k,
                               w + (r + 3) * k};
    for (int64_t i0 = 0; i0 < m; i0 += 2) {
      const uint16_t* xs[2] = {x.row(i0), i0 + 1 < m ? x.row(i0 + 1) : nullptr};
      const int count = i0 + 1 < m ? 2 : 1;
      // Once per block of rows: by the later inputs they are in L1.
      const bool prefetch = i0 == 0 && r + 4 * (blocks_ahead + 1) <= r1;
      if (count == 2) {
        if (prefetch) {
          FourRowsBf16Dot<2, true>(rows, k, blocks_ahead, xs, sums);
        } else {
          FourRowsBf16Dot<2, false>(rows, k, blocks_ahead, xs, sums);
        }
      } else if (prefetch) {
        FourRowsBf16Dot<1, true>(rows, k, blocks_ahead, xs, sums);
      } else {
        FourRowsBf16Dot<1, false>(rows, k, blocks_ahead, xs, sums);
      }
      for (int i = 0; i < count; ++i) {
        for (int q = 0; q < 4; ++q) {
          y[(i0 + i) * ldy + r + q] =
              Finish(bias, r + q, _mm512_reduce_add_ps(sums[i][q]));
        }
      }
    }
  }
  for (; r < r1; ++r) {
    for (int64_t i = 0; i < m; ++i) {
      y[i * ldy + r] = Finish(bias, r, OneRowBf16Dot(w + r * k, k, x.row(i)));
    }
  }
}

#else  // !__x86_64__

// No CPU without x86-64 has AVX-512 BF16, so nothing calls this; it
// computes the same products in plain C++ so that the library links and
// means the same everywhere.
void Bf16DotRows(const uint16_t* w, const Bf16Inputs& x, const float* bias,
                 int64_t r0, int64_t r1, float* y, int64_t ldy) {
  const int64_t k = x.k();
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t i = 0; i < x.rows(); ++i) {
      float a = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        a += Bf16ToF32(w[r * k + j]) * Bf16ToF32(x.row(i)[j]);
      }
      y[i * ldy + r] = bias != nullptr ? a + bias[r] : a;
    }
  }
}

#endif  // __x86_64__

}  // namespace twice::kernels::cpu
