#include "kernels/cpu/lowp_dot.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "kernels/cpu/bf16_dot.h"
#include "kernels/cpu/int8_dot.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include "kernels/cpu/x86_intrinsics.h"

namespace twice::kernels::cpu {
namespace {

// Portable element loads (any alignment, little-endian).
inline float LoadWeight(DType dtype, const void* base, int64_t i) {
  const auto* bytes = static_cast<const unsigned char*>(base);
  switch (dtype) {
    case DType::kBF16:
    case DType::kF16: {
      uint16_t bits;
      std::memcpy(&bits, bytes + 2 * i, 2);
      return dtype == DType::kBF16 ? Bf16ToF32(bits) : F16ToF32(bits);
    }
    case DType::kI8:
      return static_cast<float>(static_cast<int8_t>(bytes[i]));
    case DType::kF32: {
      float v;
      std::memcpy(&v, bytes + 4 * i, 4);
      return v;
    }
  }
  return 0.0f;
}

// Bias applied to a finished dot product.
inline float Finish(const float* bias, int64_t r, float dot) {
  return bias != nullptr ? dot + bias[r] : dot;
}

void GemvRowsPortable(const LowpRows& w, const float* x, const float* bias,
                      int64_t r0, int64_t r1, float* y) {
  for (int64_t r = r0; r < r1; ++r) {
    float a = 0.0f;
    for (int64_t j = 0; j < w.k; ++j) {
      a += LoadWeight(w.dtype, w.data, r * w.k + j) * x[j];
    }
    y[r] = Finish(bias, r, a);
  }
}

void RowsToF32Portable(const LowpRows& w, int64_t r0, int64_t r1, float* out) {
  for (int64_t r = r0; r < r1; ++r) {
    float* o = out + (r - r0) * w.k;
    for (int64_t j = 0; j < w.k; ++j) {
      o[j] = LoadWeight(w.dtype, w.data, r * w.k + j);
    }
  }
}

#if defined(__x86_64__)

#define TWICE_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define TWICE_AVX2 __attribute__((target("avx2,fma,f16c")))

// 16 weights from element `i` on, widened to f32; `mask` selects the
// lanes of a tail (the others read nothing and are zero).
template <DType D>
TWICE_AVX512 inline __m512 Widen16(const void* base, int64_t i,
                                   __mmask16 mask) {
  if constexpr (D == DType::kBF16) {
    const __m256i h =
        _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(base) + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    static_assert(D == DType::kF16);
    const __m256i h =
        _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(base) + i);
    return _mm512_cvtph_ps(h);
  }
}

// y[r .. r + 3] from the four rows' accumulators (summed across lanes,
// scaled and biased).
TWICE_AVX512 inline void StoreFourRows(const LowpRows& w, const float* bias,
                                       int64_t r, __m512 a0, __m512 a1,
                                       __m512 a2, __m512 a3, float* y) {
  y[r] = Finish(bias, r, _mm512_reduce_add_ps(a0));
  y[r + 1] = Finish(bias, r + 1, _mm512_reduce_add_ps(a1));
  y[r + 2] = Finish(bias, r + 2, _mm512_reduce_add_ps(a2));
  y[r + 3] = Finish(bias, r + 3, _mm512_reduce_add_ps(a3));
}

// Four rows of W at a time against x, two accumulators per row (eight
// independent FMA chains), so four row streams are in flight per thread.
template <DType D>
TWICE_AVX512 void GemvRowsAvx512(const LowpRows& w, const float* x,
                                 const float* bias, int64_t r0, int64_t r1,
                                 float* y) {
  const int64_t k = w.k;
  const __mmask16 all = 0xffff;
  const int64_t tail = k % 16;
  const __mmask16 tail_mask = static_cast<__mmask16>((1u << tail) - 1u);
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const int64_t b0 = r * k, b1 = b0 + k, b2 = b1 + k, b3 = b2 + k;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    __m512 c0 = a0, c1 = a0, c2 = a0, c3 = a0;
    int64_t j = 0;
    for (; j + 32 <= k; j += 32) {
      const __m512 xa = _mm512_loadu_ps(x + j);
      const __m512 xb = _mm512_loadu_ps(x + j + 16);
      a0 = _mm512_fmadd_ps(Widen16<D>(w.data, b0 + j, all), xa, a0);
      a1 = _mm512_fmadd_ps(Widen16<D>(w.data, b1 + j, all), xa, a1);
      a2 = _mm512_fmadd_ps(Widen16<D>(w.data, b2 + j, all), xa, a2);
      a3 = _mm512_fmadd_ps(Widen16<D>(w.data, b3 + j, all), xa, a3);
      c0 = _mm512_fmadd_ps(Widen16<D>(w.data, b0 + j + 16, all), xb, c0);
      c1 = _mm512_fmadd_ps(Widen16<D>(w.data, b1 + j + 16, all), xb, c1);
      c2 = _mm512_fmadd_ps(Widen16<D>(w.data, b2 + j + 16, all), xb, c2);
      c3 = _mm512_fmadd_ps(Widen16<D>(w.data, b3 + j + 16, all), xb, c3);
    }
    for (; j + 16 <= k; j += 16) {
      const __m512 xa = _mm512_loadu_ps(x + j);
      a0 = _mm512_fmadd_ps(Widen16<D>(w.data, b0 + j, all), xa, a0);
      a1 = _mm512_fmadd_ps(Widen16<D>(w.data, b1 + j, all), xa, a1);
      a2 = _mm512_fmadd_ps(Widen16<D>(w.data, b2 + j, all), xa, a2);
      a3 = _mm512_fmadd_ps(Widen16<D>(w.data, b3 + j, all), xa, a3);
    }
    if (tail != 0) {
      const __m512 xa = _mm512_maskz_loadu_ps(tail_mask, x + j);
      a0 = _mm512_fmadd_ps(Widen16<D>(w.data, b0 + j, tail_mask), xa, a0);
      a1 = _mm512_fmadd_ps(Widen16<D>(w.data, b1 + j, tail_mask), xa, a1);
      a2 = _mm512_fmadd_ps(Widen16<D>(w.data, b2 + j, tail_mask), xa, a2);
      a3 = _mm512_fmadd_ps(Widen16<D>(w.data, b3 + j, tail_mask), xa, a3);
    }
    StoreFourRows(w, bias, r, _mm512_add_ps(a0, c0), _mm512_add_ps(a1, c1),
                  _mm512_add_ps(a2, c2), _mm512_add_ps(a3, c3), y);
  }
  for (; r < r1; ++r) {
    const int64_t b0 = r * k;
    __m512 a0 = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= k; j += 16) {
      a0 = _mm512_fmadd_ps(Widen16<D>(w.data, b0 + j, all),
                           _mm512_loadu_ps(x + j), a0);
    }
    if (tail != 0) {
      a0 = _mm512_fmadd_ps(Widen16<D>(w.data, b0 + j, tail_mask),
                           _mm512_maskz_loadu_ps(tail_mask, x + j), a0);
    }
    y[r] = Finish(bias, r, _mm512_reduce_add_ps(a0));
  }
}

// The even / odd elements of 32 bf16 as two f32 vectors (see below).
TWICE_AVX512 inline __m512 EvenBf16(__m512i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
TWICE_AVX512 inline __m512 OddBf16(__m512i v) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}

// acc + elements [body, k) of bf16 row `row` times x (at most 31 of them,
// in the masked 16-wide form).
TWICE_AVX512 inline __m512 Bf16TailDot(const uint16_t* row, const float* x,
                                       int64_t body, int64_t k, __m512 acc) {
  for (int64_t j = body; j < k; j += 16) {
    const int64_t n = std::min<int64_t>(16, k - j);
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1u);
    acc = _mm512_fmadd_ps(Widen16<DType::kBF16>(row, j, mask),
                          _mm512_maskz_loadu_ps(mask, x + j), acc);
  }
  return acc;
}

// bf16 rows 32 elements per 64-byte load: each 32-bit lane holds elements
// 2i (low half) and 2i + 1 (high half), so a shift and a mask give two f32
// vectors with no shuffle; x is de-interleaved to match once per call.
// Half the widening work of Widen16, which matters because a 16-bit row
// streams twice as many elements per byte as f32.
TWICE_AVX512 void GemvRowsBf16Avx512(const LowpRows& w, const float* x,
                                     const float* bias, int64_t r0, int64_t r1,
                                     float* y) {
  const int64_t k = w.k;
  const int64_t body = k / 32 * 32;
  thread_local std::vector<float> deinterleaved;
  if (deinterleaved.size() < static_cast<size_t>(body)) {
    deinterleaved.resize(static_cast<size_t>(body));
  }
  float* xp = deinterleaved.data();
  for (int64_t b = 0; b < body; b += 32) {
    for (int i = 0; i < 16; ++i) {
      xp[b + i] = x[b + 2 * i];
      xp[b + 16 + i] = x[b + 2 * i + 1];
    }
  }
  const auto* base = static_cast<const uint16_t*>(w.data);
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint16_t* w0 = base + r * k;
    const uint16_t* w1 = w0 + k;
    const uint16_t* w2 = w1 + k;
    const uint16_t* w3 = w2 + k;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    __m512 c0 = a0, c1 = a0, c2 = a0, c3 = a0;
    for (int64_t j = 0; j < body; j += 32) {
      const __m512 xe = _mm512_loadu_ps(xp + j);
      const __m512 xo = _mm512_loadu_ps(xp + j + 16);
      const __m512i v0 = _mm512_loadu_si512(w0 + j);
      const __m512i v1 = _mm512_loadu_si512(w1 + j);
      const __m512i v2 = _mm512_loadu_si512(w2 + j);
      const __m512i v3 = _mm512_loadu_si512(w3 + j);
      a0 = _mm512_fmadd_ps(EvenBf16(v0), xe, a0);
      c0 = _mm512_fmadd_ps(OddBf16(v0), xo, c0);
      a1 = _mm512_fmadd_ps(EvenBf16(v1), xe, a1);
      c1 = _mm512_fmadd_ps(OddBf16(v1), xo, c1);
      a2 = _mm512_fmadd_ps(EvenBf16(v2), xe, a2);
      c2 = _mm512_fmadd_ps(OddBf16(v2), xo, c2);
      a3 = _mm512_fmadd_ps(EvenBf16(v3), xe, a3);
      c3 = _mm512_fmadd_ps(OddBf16(v3), xo, c3);
    }
    a0 = Bf16TailDot(w0, x, body, k, a0);
    a1 = Bf16TailDot(w1, x, body, k, a1);
    a2 = Bf16TailDot(w2, x, body, k, a2);
    a3 = Bf16TailDot(w3, x, body, k, a3);
    StoreFourRows(w, bias, r, _mm512_add_ps(a0, c0), _mm512_add_ps(a1, c1),
                  _mm512_add_ps(a2, c2), _mm512_add_ps(a3, c3), y);
  }
  for (; r < r1; ++r) {
    const uint16_t* w0 = base + r * k;
    __m512 a0 = _mm512_setzero_ps(), c0 = a0;
    for (int64_t j = 0; j < body; j += 32) {
      const __m512i v0 = _mm512_loadu_si512(w0 + j);
      a0 = _mm512_fmadd_ps(EvenBf16(v0), _mm512_loadu_ps(xp + j), a0);
      c0 = _mm512_fmadd_ps(OddBf16(v0), _mm512_loadu_ps(xp + j + 16), c0);
    }
    a0 = Bf16TailDot(w0, x, body, k, a0);
    y[r] = Finish(bias, r, _mm512_reduce_add_ps(_mm512_add_ps(a0, c0)));
  }
}

template <DType D>
TWICE_AVX512 void RowsToF32Avx512(const LowpRows& w, int64_t r0, int64_t r1,
                                  float* out) {
  const int64_t k = w.k;
  const int64_t tail = k % 16;
  const __mmask16 tail_mask = static_cast<__mmask16>((1u << tail) - 1u);
  for (int64_t r = r0; r < r1; ++r) {
    float* o = out + (r - r0) * k;
    int64_t j = 0;
    for (; j + 16 <= k; j += 16) {
      _mm512_storeu_ps(o + j, Widen16<D>(w.data, r * k + j, 0xffff));
    }
    if (tail != 0) {
      _mm512_mask_storeu_ps(o + j, tail_mask,
                            Widen16<D>(w.data, r * k + j, tail_mask));
    }
  }
}

// 8 weights from element `i` on, widened to f32 (no tail form: callers
// finish rows with the portable loop).
template <DType D>
TWICE_AVX2 inline __m256 Widen8(const void* base, int64_t i) {
  if constexpr (D == DType::kBF16) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(
        static_cast<const uint16_t*>(base) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    static_assert(D == DType::kF16);
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
        static_cast<const uint16_t*>(base) + i)));
  }
}

template <DType D>
TWICE_AVX2 void GemvRowsAvx2(const LowpRows& w, const float* x,
                             const float* bias, int64_t r0, int64_t r1,
                             float* y) {
  const int64_t k = w.k;
  const int64_t body = k / 8 * 8;
  int64_t r = r0;
  auto tail_dot = [&](int64_t row) {
    float a = 0.0f;
    for (int64_t j = body; j < k; ++j) {
      a += LoadWeight(D, w.data, row * k + j) * x[j];
    }
    return a;
  };
  for (; r + 4 <= r1; r += 4) {
    const int64_t b0 = r * k, b1 = b0 + k, b2 = b1 + k, b3 = b2 + k;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t j = 0; j < body; j += 8) {
      const __m256 xv = _mm256_loadu_ps(x + j);
      a0 = _mm256_fmadd_ps(Widen8<D>(w.data, b0 + j), xv, a0);
      a1 = _mm256_fmadd_ps(Widen8<D>(w.data, b1 + j), xv, a1);
      a2 = _mm256_fmadd_ps(Widen8<D>(w.data, b2 + j), xv, a2);
      a3 = _mm256_fmadd_ps(Widen8<D>(w.data, b3 + j), xv, a3);
    }
    y[r] = Finish(bias, r, HorizontalSum8(a0) + tail_dot(r));
    y[r + 1] = Finish(bias, r + 1, HorizontalSum8(a1) + tail_dot(r + 1));
    y[r + 2] = Finish(bias, r + 2, HorizontalSum8(a2) + tail_dot(r + 2));
    y[r + 3] = Finish(bias, r + 3, HorizontalSum8(a3) + tail_dot(r + 3));
  }
  for (; r < r1; ++r) {
    __m256 a0 = _mm256_setzero_ps();
    for (int64_t j = 0; j < body; j += 8) {
      a0 = _mm256_fmadd_ps(Widen8<D>(w.data, r * k + j), _mm256_loadu_ps(x + j),
                           a0);
    }
    y[r] = Finish(bias, r, HorizontalSum8(a0) + tail_dot(r));
  }
}

template <DType D>
TWICE_AVX2 void RowsToF32Avx2(const LowpRows& w, int64_t r0, int64_t r1,
                              float* out) {
  const int64_t k = w.k;
  const int64_t body = k / 8 * 8;
  for (int64_t r = r0; r < r1; ++r) {
    float* o = out + (r - r0) * k;
    for (int64_t j = 0; j < body; j += 8) {
      _mm256_storeu_ps(o + j, Widen8<D>(w.data, r * k + j));
    }
    for (int64_t j = body; j < k; ++j) {
      o[j] = LoadWeight(D, w.data, r * k + j);
    }
  }
}

// Calls fn.template operator()<D>() for a BF16 or F16 `dtype` (int8 has
// its own kernels, int8_dot.h).
template <typename Fn>
void ForFloatDType(DType dtype, Fn fn) {
  if (dtype == DType::kBF16) fn.template operator()<DType::kBF16>();
  if (dtype == DType::kF16) fn.template operator()<DType::kF16>();
}

#endif  // __x86_64__

}  // namespace

Isa CpuIsa() {
#if defined(__x86_64__)
  static const Isa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq")) {
      // AVX512_BF16: CPUID leaf 7, sub-leaf 1, EAX bit 5.
      unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
      const bool bf16 = __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 &&
                        (eax & (1u << 5)) != 0;
      return bf16 ? Isa::kAvx512Bf16 : Isa::kAvx512;
    }
    // F16C from CPUID leaf 1 (clang's __builtin_cpu_supports lacks it).
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c =
        __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        f16c) {
      return Isa::kAvx2;
    }
    return Isa::kPortable;
  }();
  return isa;
#else
  return Isa::kPortable;
#endif
}

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Bf16:
      return "avx512_bf16";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kPortable:
      return "portable";
  }
  return "?";
}

void RoundToBf16(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = std::bit_cast<float>(RoundedBf16Bits(x[i]));
  }
}

LowpRows LowpRowsOf(const Tensor& t) {
  const int64_t rows = t.rank() == 0 ? 1 : t.dim(0);
  const int64_t k = rows == 0 ? 0 : t.size() / rows;
  return {t.dtype(), t.raw_data(), t.scales(), k};
}

namespace {

// The int8 build that goes with `isa` (so a test that runs each Isa also
// runs each int8 build this CPU has).
Int8Build Int8BuildOf(Isa isa) {
  const Int8Build best = CpuInt8Build();
  if (isa >= Isa::kAvx512) return best;
  if (isa == Isa::kAvx2) return std::min(best, Int8Build::kAvx2);
  return Int8Build::kPortable;
}

}  // namespace

void LowpGemvRows(Isa isa, const LowpRows& w, const float* x, const float* bias,
                  int64_t r0, int64_t r1, float* y) {
  if (w.dtype == DType::kI8) {
    thread_local QuantizedInput quantized;
    QuantizeInput(x, w.k, quantized);
    Int8GemvRows(Int8BuildOf(isa),
                 {static_cast<const int8_t*>(w.data), w.scales, w.k}, quantized,
                 bias, r0, r1, y);
    return;
  }
  if (w.dtype == DType::kBF16) {
#if defined(__x86_64__)
    if (isa == Isa::kAvx512Bf16) {
      LowpGemmRows(isa, w, x, 1, bias, r0, r1, y, 0);
      return;
    }
#endif
    // The other builds multiply widened weights by the rounded input: the
    // same exact products, summed in another order.
    thread_local std::vector<float> rounded;
    if (rounded.size() < static_cast<size_t>(w.k)) {
      rounded.resize(static_cast<size_t>(w.k));
    }
    RoundToBf16(x, w.k, rounded.data());
    x = rounded.data();
  }
#if defined(__x86_64__)
  if (isa == Isa::kAvx512 && w.dtype == DType::kBF16) {
    GemvRowsBf16Avx512(w, x, bias, r0, r1, y);
    return;
  }
  if (isa == Isa::kAvx512 || isa == Isa::kAvx512Bf16) {
    ForFloatDType(w.dtype,
                  [&]<DType D>() { GemvRowsAvx512<D>(w, x, bias, r0, r1, y); });
    return;
  }
  if (isa == Isa::kAvx2) {
    ForFloatDType(w.dtype,
                  [&]<DType D>() { GemvRowsAvx2<D>(w, x, bias, r0, r1, y); });
    return;
  }
#endif
  GemvRowsPortable(w, x, bias, r0, r1, y);
}

void LowpGemmRows(Isa isa, const LowpRows& w, const float* x, int64_t m,
                  const float* bias, int64_t r0, int64_t r1, float* y,
                  int64_t ldy) {
  if (w.dtype == DType::kBF16 && isa == Isa::kAvx512Bf16) {
    thread_local Bf16Inputs packed;
    packed.Pack(x, m, w.k);
    Bf16DotRows(static_cast<const uint16_t*>(w.data), packed, bias, r0, r1, y,
                ldy);
    return;
  }
  for (int64_t i = 0; i < m; ++i) {
    LowpGemvRows(isa, w, x + i * w.k, bias, r0, r1, y + i * ldy);
  }
}

void LowpRowsToF32(Isa isa, const LowpRows& w, int64_t r0, int64_t r1,
                   float* out) {
  if (w.dtype == DType::kI8) {
    Int8RowsToF32(Int8BuildOf(isa),
                  {static_cast<const int8_t*>(w.data), w.scales, w.k}, r0, r1,
                  out);
    return;
  }
#if defined(__x86_64__)
  if (isa == Isa::kAvx512 || isa == Isa::kAvx512Bf16) {
    ForFloatDType(w.dtype,
                  [&]<DType D>() { RowsToF32Avx512<D>(w, r0, r1, out); });
    return;
  }
  if (isa == Isa::kAvx2) {
    ForFloatDType(w.dtype,
                  [&]<DType D>() { RowsToF32Avx2<D>(w, r0, r1, out); });
    return;
  }
#endif
  RowsToF32Portable(w, r0, r1, out);
}

}  // namespace twice::kernels::cpu
