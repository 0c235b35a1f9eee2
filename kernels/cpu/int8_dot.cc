#include "kernels/cpu/int8_dot.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/cpu/gemv_tasks.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/x86_intrinsics.h"
#include "kernels/dtype.h"
#include "kernels/i8_layout.h"

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

// Row r's products in the portable build, block by block in the order the
// SIMD builds sum them.
float RowDotPortable(const Int8Rows& w, const QuantizedInput& x, int64_t r) {
  const int64_t k = w.k;
  float acc = 0.0f;
  for (int64_t b = 0; b < I8BlocksPerRow(k); ++b) {
    const int64_t end = std::min(k, (b + 1) * kI8Block);
    int32_t dot = 0;
    for (int64_t c = b * kI8Block; c < end; ++c) {
      dot += int32_t{x.values[c]} * int32_t{w.values[I8ValueIndex(k, r, c)]};
    }
    acc += static_cast<float>(dot) *
           (w.scales[I8ScaleIndex(k, r, b)] * x.scales[b]);
  }
  return acc;
}

void GemvPortable(const Int8Rows& w, const QuantizedInput& x, const float* bias,
                  int64_t r0, int64_t r1, float* y) {
  for (int64_t r = r0; r < r1; ++r) {
    const float dot = RowDotPortable(w, x, r);
    y[r] = bias != nullptr ? dot + bias[r] : dot;
  }
}

void RowsToF32Portable(const Int8Rows& w, int64_t r0, int64_t r1, float* out) {
  const int64_t k = w.k;
  for (int64_t r = r0; r < r1; ++r) {
    float* o = out + (r - r0) * k;
    for (int64_t c = 0; c < k; ++c) {
      o[c] = static_cast<float>(w.values[I8ValueIndex(k, r, c)]) *
             w.scales[I8ScaleIndex(k, r, c / kI8Block)];
    }
  }
}

// The four int16 inputs of quad q of x (one 64-bit lane).
inline int64_t InputQuad(const QuantizedInput& x, int64_t q) {
  int64_t bits;
  std::memcpy(&bits, x.values.data() + q * kI8Quad, sizeof(bits));
  return bits;
}

// Rows [r0, r1) of y from the 16 results of row group g (rows 16g ..
// 16g + 15) in `group`: stored whole when the group lies inside [r0, r1),
// else row by row (the last group of W may have padding rows).
inline void StoreGroup(const float* group, const float* bias, int64_t g,
                       int64_t r0, int64_t r1, float* y) {
  const int64_t first = std::max(r0, g * kI8RowGroup);
  const int64_t last = std::min(r1, (g + 1) * kI8RowGroup);
  for (int64_t r = first; r < last; ++r) {
    const float dot = group[r - g * kI8RowGroup];
    y[r] = bias != nullptr ? dot + bias[r] : dot;
  }
}

#if defined(__x86_64__)

#define TWICE_AVX512_VNNI                                     \
  __attribute__((                                             \
      target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni," \
             "fma")))
#define TWICE_AVX2_INT8 __attribute__((target("avx2,fma")))

static_assert(kI8Block == 64 && kI8RowGroup == 16 && kI8Quad == 4,
              "the SIMD builds take a block of a group as 16 lines of 64 "
              "bytes");

// acc + the products of half a line (8 rows x 4 weights at `half`,
// sign-extended to int16) with a quad's inputs broadcast to every row.
TWICE_AVX512_VNNI inline __m512i HalfLineDot(__m512i acc, const int8_t* half,
                                             __m512i quad) {
  return _mm512_dpwssd_epi32(acc,
                             _mm512_cvtepi8_epi16(_mm256_loadu_si256(
                                 reinterpret_cast<const __m256i*>(half))),
                             quad);
}

// acc + one block's 16 row sums, scaled: lo and hi hold rows 0-7 and 8-15
// as pairs of lanes (2i, 2i + 1), added here; block_scales are the rows'
// scales of the block, x_scale the input's.
TWICE_AVX512_VNNI inline __m512 AddBlock(__m512 acc, __m512i lo, __m512i hi,
                                         __m512 block_scales, float x_scale) {
  const __m512i even_lanes = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16,
                                               18, 20, 22, 24, 26, 28, 30);
  const __m512i odd_lanes = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19,
                                              21, 23, 25, 27, 29, 31);
  const __m512i rows =
      _mm512_add_epi32(_mm512_permutex2var_epi32(lo, even_lanes, hi),
                       _mm512_permutex2var_epi32(lo, odd_lanes, hi));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(rows),
                         _mm512_mul_ps(block_scales, _mm512_set1_ps(x_scale)),
                         acc);
}

// The 16 products of row group g. Per quad, each half of the 64-byte line
// (8 rows x 4 weights) is sign-extended to 32 int16 and multiplied by the
// quad's four inputs broadcast: lane 2i holds row i's first pair, lane
// 2i + 1 its second. Two accumulators per half (even and odd quads) keep
// four vpdpwssd chains in flight; after each block the pairs of lanes are
// added and the block's 16 row scales applied as one vector.
TWICE_AVX512_VNNI inline __m512 GroupDotVnni(const Int8Rows& w,
                                             const QuantizedInput& x,
                                             int64_t g) {
  const int64_t blocks = I8BlocksPerRow(w.k);
  const int8_t* values = w.values + g * blocks * kI8GroupBlockBytes;
  const float* scales = w.scales + g * blocks * kI8RowGroup;
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* line = values + b * kI8GroupBlockBytes;
    __m512i lo0 = _mm512_setzero_si512(), hi0 = lo0, lo1 = lo0, hi1 = lo0;
    for (int64_t q = 0; q < 16; q += 2) {
      const __m512i x0 = _mm512_set1_epi64(InputQuad(x, b * 16 + q));
      const __m512i x1 = _mm512_set1_epi64(InputQuad(x, b * 16 + q + 1));
      const int8_t* l0 = line + q * 64;
      const int8_t* l1 = l0 + 64;
      // The groups are one stream; a prefetch past this task's rows or
      // past W is harmless (prefetches do not fault).
      _mm_prefetch(reinterpret_cast<const char*>(l0) + kGemvPrefetchBytes,
                   _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(l1) + kGemvPrefetchBytes,
                   _MM_HINT_T1);
      lo0 = HalfLineDot(lo0, l0, x0);
      hi0 = HalfLineDot(hi0, l0 + 32, x0);
      lo1 = HalfLineDot(lo1, l1, x1);
      hi1 = HalfLineDot(hi1, l1 + 32, x1);
    }
    acc = AddBlock(acc, _mm512_add_epi32(lo0, lo1), _mm512_add_epi32(hi0, hi1),
                   _mm512_loadu_ps(scales + b * kI8RowGroup), x.scales[b]);
  }
  return acc;
}

TWICE_AVX512_VNNI void GemvVnni(const Int8Rows& w, const QuantizedInput& x,
                                const float* bias, int64_t r0, int64_t r1,
                                float* y) {
  for (int64_t g = r0 / kI8RowGroup; g * kI8RowGroup < r1; ++g) {
    const __m512 dot = GroupDotVnni(w, x, g);
    const int64_t first = g * kI8RowGroup;
    if (first >= r0 && first + kI8RowGroup <= r1) {
      _mm512_storeu_ps(y + first,
                       bias != nullptr
                           ? _mm512_add_ps(dot, _mm512_loadu_ps(bias + first))
                           : dot);
    } else {
      alignas(64) float group[kI8RowGroup];
      _mm512_store_ps(group, dot);
      StoreGroup(group, bias, g, r0, r1, y);
    }
  }
}

// The 16 products of row group g with each of M inputs (M <= 4): each
// half line is loaded and widened once and multiplied by every input's
// quad. The integer block sums are exact and each input's blocks are added
// in GroupDotVnni's order with the same operations, so every result is
// bit for bit that input's Int8GemvRows result.
template <int M>
TWICE_AVX512_VNNI inline void GroupDotVnniBatch(const Int8Rows& w,
                                                const QuantizedInput* const* x,
                                                int64_t g,
                                                float (*out)[kI8RowGroup]) {
  const int64_t blocks = I8BlocksPerRow(w.k);
  const int8_t* values = w.values + g * blocks * kI8GroupBlockBytes;
  const float* scales = w.scales + g * blocks * kI8RowGroup;
  __m512 acc[M];
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* line = values + b * kI8GroupBlockBytes;
    __m512i lo[M], hi[M];
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) lo[i] = hi[i] = _mm512_setzero_si512();
    for (int64_t q = 0; q < 16; ++q) {
      _mm_prefetch(
          reinterpret_cast<const char*>(line + q * 64) + kGemvPrefetchBytes,
          _MM_HINT_T1);  // as in GroupDotVnni
      const __m512i w_lo = _mm512_cvtepi8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(line + q * 64)));
      const __m512i w_hi = _mm512_cvtepi8_epi16(_mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(line + q * 64 + 32)));
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) {
        const __m512i quad = _mm512_set1_epi64(InputQuad(*x[i], b * 16 + q));
        lo[i] = _mm512_dpwssd_epi32(lo[i], w_lo, quad);
        hi[i] = _mm512_dpwssd_epi32(hi[i], w_hi, quad);
      }
    }
    const __m512 block_scales = _mm512_loadu_ps(scales + b * kI8RowGroup);
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      acc[i] = AddBlock(acc[i], lo[i], hi[i], block_scales, x[i]->scales[b]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) _mm512_storeu_ps(out[i], acc[i]);
}

TWICE_AVX512_VNNI void GemmVnni(const Int8Rows& w, const QuantizedInput* x,
                                int64_t m, const float* bias, int64_t r0,
                                int64_t r1, float* y, int64_t ldy) {
  alignas(64) float out[4][kI8RowGroup];
  const QuantizedInput* inputs[4];
  for (int64_t g = r0 / kI8RowGroup; g * kI8RowGroup < r1; ++g) {
    // Four inputs at a time; the group's weights (a few KiB per block
    // row) stay in cache for the next four.
    for (int64_t i0 = 0; i0 < m; i0 += 4) {
      const int64_t count = std::min<int64_t>(4, m - i0);
      for (int64_t i = 0; i < count; ++i) inputs[i] = &x[i0 + i];
      switch (count) {
        case 1:
          GroupDotVnniBatch<1>(w, inputs, g, out);
          break;
        case 2:
          GroupDotVnniBatch<2>(w, inputs, g, out);
          break;
        case 3:
          GroupDotVnniBatch<3>(w, inputs, g, out);
          break;
        default:
          GroupDotVnniBatch<4>(w, inputs, g, out);
          break;
      }
      for (int64_t i = 0; i < count; ++i) {
        StoreGroup(out[i], bias, g, r0, r1, y + (i0 + i) * ldy);
      }
    }
  }
}

// Rows [r0, r1) widened: a row's 64 weights of a block are one dword from
// each of the block's 16 lines, gathered (from L1: the block is 1 KiB),
// then widened 16 at a time and scaled.
TWICE_AVX512_VNNI void RowsToF32Vnni(const Int8Rows& w, int64_t r0, int64_t r1,
                                     float* out) {
  const int64_t k = w.k;
  const int64_t blocks = I8BlocksPerRow(k);
  const __m512i line_offsets = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(64));
  for (int64_t r = r0; r < r1; ++r) {
    float* o = out + (r - r0) * k;
    const int64_t g = r / kI8RowGroup;
    const int64_t i = r % kI8RowGroup;
    for (int64_t b = 0; b < blocks; ++b) {
      const int8_t* block =
          w.values + (g * blocks + b) * kI8GroupBlockBytes + i * kI8Quad;
      const __m512i bytes = _mm512_i32gather_epi32(line_offsets, block, 1);
      const __m512 scale = _mm512_set1_ps(w.scales[I8ScaleIndex(k, r, b)]);
      const int64_t c0 = b * kI8Block;
      for (int part = 0; part < 4 && c0 + part * 16 < k; ++part) {
        __m128i sixteen;
        switch (part) {
          case 0:
            sixteen = _mm512_extracti32x4_epi32(bytes, 0);
            break;
          case 1:
            sixteen = _mm512_extracti32x4_epi32(bytes, 1);
            break;
          case 2:
            sixteen = _mm512_extracti32x4_epi32(bytes, 2);
            break;
          default:
            sixteen = _mm512_extracti32x4_epi32(bytes, 3);
            break;
        }
        const __m512 v = _mm512_mul_ps(
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sixteen)), scale);
        const int64_t c = c0 + part * 16;
        const int64_t n = std::min<int64_t>(16, k - c);
        _mm512_mask_storeu_ps(o + c, static_cast<__mmask16>((1u << n) - 1u), v);
      }
    }
  }
}

// The 16 products of row group g at 8 lanes: each line's four quarters
// (4 rows x 4 weights) are sign-extended to 16 int16 and multiplied
// pairwise by the quad's inputs (vpmaddwd); two lanes per row, added
// after each block.
TWICE_AVX2_INT8 void GroupDotAvx2(const Int8Rows& w, const QuantizedInput& x,
                                  int64_t g, float* group) {
  const int64_t blocks = I8BlocksPerRow(w.k);
  const int8_t* values = w.values + g * blocks * kI8GroupBlockBytes;
  const float* scales = w.scales + g * blocks * kI8RowGroup;
  __m256 acc_lo = _mm256_setzero_ps(), acc_hi = acc_lo;
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* line = values + b * kI8GroupBlockBytes;
    __m256i a[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int64_t q = 0; q < 16; ++q) {
      const __m256i xq = _mm256_set1_epi64x(InputQuad(x, b * 16 + q));
#pragma GCC unroll 4
      for (int part = 0; part < 4; ++part) {
        const __m256i wide = _mm256_cvtepi8_epi16(_mm_loadu_si128(
            reinterpret_cast<const __m128i*>(line + q * 64 + part * 16)));
        a[part] = _mm256_add_epi32(a[part], _mm256_madd_epi16(wide, xq));
      }
    }
    // hadd gives rows [0 1 4 5 | 2 3 6 7]; the permute puts them in order.
    const __m256i rows_lo =
        _mm256_permute4x64_epi64(_mm256_hadd_epi32(a[0], a[1]), 0xD8);
    const __m256i rows_hi =
        _mm256_permute4x64_epi64(_mm256_hadd_epi32(a[2], a[3]), 0xD8);
    const __m256 sx = _mm256_set1_ps(x.scales[b]);
    acc_lo = _mm256_fmadd_ps(
        _mm256_cvtepi32_ps(rows_lo),
        _mm256_mul_ps(_mm256_loadu_ps(scales + b * kI8RowGroup), sx), acc_lo);
    acc_hi = _mm256_fmadd_ps(
        _mm256_cvtepi32_ps(rows_hi),
        _mm256_mul_ps(_mm256_loadu_ps(scales + b * kI8RowGroup + 8), sx),
        acc_hi);
  }
  _mm256_storeu_ps(group, acc_lo);
  _mm256_storeu_ps(group + 8, acc_hi);
}

TWICE_AVX2_INT8 void GemvAvx2(const Int8Rows& w, const QuantizedInput& x,
                              const float* bias, int64_t r0, int64_t r1,
                              float* y) {
  for (int64_t g = r0 / kI8RowGroup; g * kI8RowGroup < r1; ++g) {
    float group[kI8RowGroup];
    GroupDotAvx2(w, x, g, group);
    StoreGroup(group, bias, g, r0, r1, y);
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

void Int8GemmRows(Int8Build build, const Int8Rows& w, const QuantizedInput* x,
                  int64_t m, const float* bias, int64_t r0, int64_t r1,
                  float* y, int64_t ldy) {
#if defined(__x86_64__)
  if (build == Int8Build::kAvx512Vnni) {
    GemmVnni(w, x, m, bias, r0, r1, y, ldy);
    return;
  }
#endif
  // The other builds take one input at a time (the same sums as their
  // one-row products, so the same results).
  for (int64_t i = 0; i < m; ++i) {
    Int8GemvRows(build, w, x[i], bias, r0, r1, y + i * ldy);
  }
}

void Int8RowsToF32(Int8Build build, const Int8Rows& w, int64_t r0, int64_t r1,
                   float* out) {
#if defined(__x86_64__)
  if (build == Int8Build::kAvx512Vnni) {
    RowsToF32Vnni(w, r0, r1, out);
    return;
  }
#endif
  RowsToF32Portable(w, r0, r1, out);
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
