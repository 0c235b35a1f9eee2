// What the hand-written x86 kernels (lowp_dot.cc, bf16_dot.cc, int8_dot.cc)
// share: the intrinsics header, a warning workaround that must cover the
// including file, and small reductions. Include it from .cc files only,
// after their other includes.
#ifndef TWICE_KERNELS_CPU_X86_INTRINSICS_H_
#define TWICE_KERNELS_CPU_X86_INTRINSICS_H_

#if defined(__x86_64__)
#include <immintrin.h>

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 conversion and reduction intrinsics start from
// _mm*_undefined_*, which its -W(maybe-)uninitialized reports inside the
// intrinsic headers (which of the two depends on the optimisation level).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace twice::kernels::cpu {

// The sum of the 8 lanes of v.
__attribute__((target("avx"))) inline float HorizontalSum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace twice::kernels::cpu

#endif  // __x86_64__

#endif  // TWICE_KERNELS_CPU_X86_INTRINSICS_H_
