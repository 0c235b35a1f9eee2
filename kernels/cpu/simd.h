// Vectorisation helpers shared by the CPU kernels.
//
// TWICE_CPU_CLONES: the build targets baseline x86-64 (SSE2) so binaries run
// on any x86-64 host, which would leave the hot loops 4 floats wide. A
// function marked with it is compiled three times (AVX-512, AVX2 + FMA,
// baseline) and the dynamic loader picks the widest the CPU supports
// (GCC target_clones / ifunc). Mark the function that holds the loop, not a
// tiny helper: a clone is never inlined into its caller. Elsewhere (other
// compilers, sanitizer builds) it is empty.
//
// The kernels build with -fopenmp-simd (honour `#pragma omp simd`, needed to
// vectorise float reductions, whose order then changes) and
// -fno-trapping-math (lets GCC if-convert the clamps below); no -ffast-math.
//
// FastExp(x): e^x in float for x in [-87.3, 88] (clamped outside, so 2^n
// stays a normal float) with
// relative error below 2e-7: n = round(x / ln 2), r = x - n ln 2 (Cody-Waite
// split), e^r by its degree-6 minimax polynomial (Cephes expf), times 2^n
// built in the exponent bits. Branch-free, so loops over it vectorise.
//
// ScratchFloats(slot, n): a per-thread buffer of at least n floats that
// grows once and is reused by later calls, so kernels allocate nothing per
// call in steady state. Contents are undefined on entry. A kernel uses a
// slot for one purpose at a time: slot 0 inside pool tasks, slot 1 on the
// calling thread around a ParallelFor (the caller runs tasks too).
#ifndef TWICE_KERNELS_CPU_SIMD_H_
#define TWICE_KERNELS_CPU_SIMD_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    !defined(__SANITIZE_ADDRESS__)
#define TWICE_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TWICE_CPU_CLONES
#endif

namespace twice::kernels::cpu {

inline float FastExp(float x) {
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.0f ? 88.0f : x;
  // Adding 1.5 · 2^23 rounds x / ln 2 to the nearest integer n and leaves n
  // in the low mantissa bits of t.
  const float t = x * 1.44269504088896341f + 12582912.0f;
  const float n = t - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (std::bit_cast<int32_t>(t) - 0x4B400000 + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

// Softmax weights e^x with x below this (a score under the row's maximum
// by more than 70: 4e-31 of the maximum's weight, far below float
// rounding) are taken as 0 by the attention kernels: a trained model's
// sharp rows would otherwise send exp into its slow underflow path and the
// sums into denormal arithmetic, several times slower for nothing.
inline constexpr float kNegligibleSoftmaxExponent = -70.0f;

inline float* ScratchFloats(int slot, size_t n) {
  constexpr int kSlots = 2;
  thread_local std::vector<float> buffers[kSlots];
  std::vector<float>& b = buffers[slot];
  if (b.size() < n) b.resize(n);
  return b.data();
}

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_SIMD_H_
