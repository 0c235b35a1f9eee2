#include "kernels/cpu/int8_dot.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/cpu/simd.h"
#include "kernels/cpu/x86_intrinsics.h"
#include "kernels/dtype.h"

namespace twice::kernels::cpu {
namespace {

constexpr float kInputMax = 32767.0f;

// Quantizes the n <= kI8Block elements of one block of x into q and
// returns its scale (QuantizeInput's rule).
TWICE_CPU_CLONES float QuantizeBlock(const float* x, int64_t n, int16_t* q) {
  float max_abs = 0.0f;
  bool finite = true;
#pragma omp simd reduction(max : max_abs) reduction(&& : finite)
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    finite = finite && a <= FLT_MAX;
    max_abs = std::max(max_abs, a);
  }
  if (!finite) {
    std::fill(q, q + n, int16_t{0});
    return std::nanf("");
  }
  const float scale = max_abs / kInputMax;
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    // |x[i] * inv| <= 32767 up to one rounding: the clamp only guards that.
    const float v =
        std::clamp(std::nearbyint(x[i] * inv), -kInputMax, kInputMax);
    q[i] = static_cast<int16_t>(v);
  }
  return scale;
}

void GemvPortable(const Int8Rows& w, const QuantizedInput& x, const float* bias,
                  int64_t r0, int64_t r1, float* y) {
  const int64_t k = w.k;
  const int64_t blocks = I8BlocksPerRow(k);
  for (int64_t r = r0; r < r1; ++r) {
    const int8_t* row = w.values + r * k;
    float acc = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t end = std::min(k, (b + 1) * kI8Block);
      int32_t dot = 0;
      for (int64_t j = b * kI8Block; j < end; ++j) {
        dot += int32_t{x.values[j]} * int32_t{row[j]};
      }
      acc += static_cast<float>(dot) * w.scales[r * blocks + b] * x.scales[b];
    }
    y[r] = bias != nullptr ? acc + bias[r] : acc;
  }
}

#if defined(__x86_64__)

#define TWICE_AVX512_VNNI                                     \
  __attribute__((                                             \
      target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni," \
             "fma")))
#define TWICE_AVX2_INT8 __attribute__((target("avx2,fma")))

static_assert(kI8Block == 64, "the SIMD builds take one block per 64 bytes");

// 32 int8 weights at p (`mask`: which of them exist; the rest read as 0)
// as 32 int16.
TWICE_AVX512_VNNI inline __m512i Widen32(const int8_t* p, __mmask32 mask) {
  return _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mask, p));
}

// 32-bit sums of x · w over one block: x lo / hi are its two halves
// (32 int16 each), w lo / hi the weights widened.
TWICE_AVX512_VNNI inline __m512i BlockDot(__m512i x_lo, __m512i x_hi,
                                          __m512i w_lo, __m512i w_hi) {
  return _mm512_dpwssd_epi32(
      _mm512_dpwssd_epi32(_mm512_setzero_si512(), x_lo, w_lo), x_hi, w_hi);
}

// acc + dot * sw * sx.
TWICE_AVX512_VNNI inline __m512 Accumulate(__m512 acc, __m512i dot, float sw,
                                           __m512 sx) {
  return _mm512_fmadd_ps(
      _mm512_mul_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(sw)), sx, acc);
}

// Rows [r, r + kRows) of W: they share each block of x. A row's last,
// partial block is read with masked loads (zeros past k). The loops over
// rows must unroll, so that each row's accumulator stays in a register.
template <int kRows>
TWICE_AVX512_VNNI inline void RowsVnni(const Int8Rows& w,
                                       const QuantizedInput& x,
                                       const float* bias, int64_t r, float* y) {
  const int64_t k = w.k;
  const int64_t blocks = I8BlocksPerRow(k);
  const int64_t full = k / kI8Block;
  const int64_t tail = k - full * kI8Block;
  // The tail's two halves.
  const auto tail_lo =
      static_cast<__mmask32>(tail >= 32 ? ~0u : (uint32_t{1} << tail) - 1u);
  const auto tail_hi = static_cast<__mmask32>(
      tail <= 32 ? 0u : (uint32_t{1} << (tail - 32)) - 1u);
  const int8_t* row[kRows];
  const float* scale[kRows];
  __m512 acc[kRows];
#pragma GCC unroll 4
  for (int i = 0; i < kRows; ++i) {
    row[i] = w.values + (r + i) * k;
    scale[i] = w.scales + (r + i) * blocks;
    acc[i] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t j = b * kI8Block;
    const __m512i x_lo = _mm512_loadu_si512(x.values.data() + j);
    const __m512i x_hi = _mm512_loadu_si512(x.values.data() + j + 32);
    const __m512 sx = _mm512_set1_ps(x.scales[b]);
    const __mmask32 lo = b < full ? ~__mmask32{0} : tail_lo;
    const __mmask32 hi = b < full ? ~__mmask32{0} : tail_hi;
#pragma GCC unroll 4
    for (int i = 0; i < kRows; ++i) {
      const __m512i dot = BlockDot(x_lo, x_hi, Widen32(row[i] + j, lo),
                                   Widen32(row[i] + j + 32, hi));
      acc[i] = Accumulate(acc[i], dot, scale[i][b], sx);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < kRows; ++i) {
    const float dot = _mm512_reduce_add_ps(acc[i]);
    y[r + i] = bias != nullptr ? dot + bias[r + i] : dot;
  }
}

// Four rows at a time (four weight streams in flight per thread).
TWICE_AVX512_VNNI void GemvVnni(const Int8Rows& w, const QuantizedInput& x,
                                const float* bias, int64_t r0, int64_t r1,
                                float* y) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) RowsVnni<4>(w, x, bias, r, y);
  for (; r < r1; ++r) RowsVnni<1>(w, x, bias, r, y);
}

// 32-bit sums of 16 int16 inputs at x times 16 int8 weights at w.
TWICE_AVX2_INT8 inline __m256i Dot16(const int16_t* x, const int8_t* w) {
  const __m256i wide = _mm256_cvtepi8_epi16(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
  return _mm256_madd_epi16(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)), wide);
}

// One row at a time; a partial last block is copied into a zero-padded
// buffer.
TWICE_AVX2_INT8 void GemvAvx2(const Int8Rows& w, const QuantizedInput& x,
                              const float* bias, int64_t r0, int64_t r1,
                              float* y) {
  const int64_t k = w.k;
  const int64_t blocks = I8BlocksPerRow(k);
  const int64_t full = k / kI8Block;
  const int64_t tail = k - full * kI8Block;
  const int16_t* xq = x.values.data();
  int8_t padded[kI8Block];
  for (int64_t r = r0; r < r1; ++r) {
    const int8_t* row = w.values + r * k;
    const float* sw = w.scales + r * blocks;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t j = b * kI8Block;
      const int8_t* wb = row + j;
      if (b == full) {  // the partial block (tail != 0)
        std::memset(padded, 0, sizeof(padded));
        std::memcpy(padded, wb, static_cast<size_t>(tail));
        wb = padded;
      }
      const __m256i sum = _mm256_add_epi32(
          _mm256_add_epi32(Dot16(xq + j, wb), Dot16(xq + j + 16, wb + 16)),
          _mm256_add_epi32(Dot16(xq + j + 32, wb + 32),
                           Dot16(xq + j + 48, wb + 48)));
      acc = _mm256_fmadd_ps(
          _mm256_mul_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(sw[b])),
          _mm256_set1_ps(x.scales[b]), acc);
    }
    const float dot = HorizontalSum8(acc);
    y[r] = bias != nullptr ? dot + bias[r] : dot;
  }
}

#endif  // __x86_64__

}  // namespace

Int8Build CpuInt8Build() {
#if defined(__x86_64__)
  static const Int8Build build = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq")) {
      if (__builtin_cpu_supports("avx512vnni")) return Int8Build::kAvx512Vnni;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      return Int8Build::kAvx2;
    }
    return Int8Build::kPortable;
  }();
  return build;
#else
  return Int8Build::kPortable;
#endif
}

std::vector<Int8Build> Int8BuildsOfThisCpu() {
  std::vector<Int8Build> builds;
  for (Int8Build b :
       {Int8Build::kPortable, Int8Build::kAvx2, Int8Build::kAvx512Vnni}) {
    if (b <= CpuInt8Build()) builds.push_back(b);
  }
  return builds;
}

const char* Int8BuildName(Int8Build build) {
  switch (build) {
    case Int8Build::kAvx512Vnni:
      return "avx512_vnni";
    case Int8Build::kAvx2:
      return "avx2";
    case Int8Build::kPortable:
      return "portable";
  }
  return "?";
}

void QuantizeInput(const float* x, int64_t k, QuantizedInput& out) {
  const int64_t blocks = I8BlocksPerRow(k);
  out.values.resize(static_cast<size_t>(blocks * kI8Block));
  out.scales.resize(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kI8Block;
    const int64_t n = std::min(kI8Block, k - begin);
    out.scales[b] = QuantizeBlock(x + begin, n, out.values.data() + begin);
  }
  std::fill(out.values.begin() + k, out.values.end(), int16_t{0});
}

void QuantizeDequantizeRows(const float* x, int64_t m, int64_t k, float* out) {
  int16_t q[kI8Block];
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t begin = 0; begin < k; begin += kI8Block) {
      const int64_t n = std::min(kI8Block, k - begin);
      const float* xb = x + i * k + begin;
      float* ob = out + i * k + begin;
      const float scale = QuantizeBlock(xb, n, q);
      for (int64_t j = 0; j < n; ++j) ob[j] = static_cast<float>(q[j]) * scale;
    }
  }
}

void Int8GemvRows(Int8Build build, const Int8Rows& w, const QuantizedInput& x,
                  const float* bias, int64_t r0, int64_t r1, float* y) {
#if defined(__x86_64__)
  switch (build) {
    case Int8Build::kAvx512Vnni:
      GemvVnni(w, x, bias, r0, r1, y);
      return;
    case Int8Build::kAvx2:
      GemvAvx2(w, x, bias, r0, r1, y);
      return;
    case Int8Build::kPortable:
      break;
  }
#endif
  GemvPortable(w, x, bias, r0, r1, y);
}

}  // namespace twice::kernels::cpu
