// 16 floats as one vector (the GCC/Clang vector extension) for the CPU
// kernels' dot products: one register on AVX-512, two on AVX2, four on
// SSE2, so each clone of a TWICE_CPU_CLONES function (cpu/simd.h) gets its
// widest form from the same source.
//
// Why not `#pragma omp simd reduction(+ : sum)`: over a runtime length GCC
// 12 ends such a loop with the 16 lanes added one after another, a chain
// of 16 dependent adds per sum. Where a kernel takes one short sum per row
// (a decode step's scores, its state rows' outputs) that chain, not memory,
// set the pace. SumLanes adds halves pairwise instead (two vector adds,
// then three scalar ones).
//
// Loads and stores go through memcpy (any alignment). Every helper is
// always inlined (TWICE_LANES_INLINE, at -O0 too) into the clone that
// calls it, so no vector crosses a call whose ABI depends on the target,
// which is what -Wpsabi warns of at each call in a baseline (SSE2) build:
// silenced for the including file, as x86_intrinsics.h silences its
// warnings. Include from .cc files only.
#ifndef TWICE_KERNELS_CPU_LANE_VECTORS_H_
#define TWICE_KERNELS_CPU_LANE_VECTORS_H_

#include <cstdint>
#include <cstring>

namespace twice::kernels::cpu {

#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#define TWICE_LANES_INLINE inline __attribute__((always_inline))

typedef float Floats16 __attribute__((vector_size(64)));
typedef float Floats8 __attribute__((vector_size(32)));
typedef float Floats4 __attribute__((vector_size(16)));
inline constexpr int64_t kLanes = 16;

TWICE_LANES_INLINE Floats16 Load16(const float* p) {
  Floats16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
TWICE_LANES_INLINE void Store16(float* p, const Floats16& v) {
  std::memcpy(p, &v, sizeof(v));
}

// The sum of v's 16 lanes, halves added pairwise.
TWICE_LANES_INLINE float SumLanes(const Floats16& v) {
  const Floats8 s8 =
      __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
      __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const Floats4 s4 = __builtin_shufflevector(s8, s8, 0, 1, 2, 3) +
                     __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// a · b over n floats: 16 partial sums, SumLanes, then the tail in order.
TWICE_LANES_INLINE float DotByLanes(const float* a, const float* b, int64_t n) {
  Floats16 acc = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) acc += Load16(a + i) * Load16(b + i);
  float dot = SumLanes(acc);
  for (; i < n; ++i) dot += a[i] * b[i];
  return dot;
}

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_LANE_VECTORS_H_
