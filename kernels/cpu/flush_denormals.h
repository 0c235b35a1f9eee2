// Denormal (subnormal) floats flushed to zero for the duration of a scope,
// on the calling thread: MXCSR's flush-to-zero (results) and
// denormals-are-zero (inputs) bits, restored on exit.
//
// Kernels whose values decay geometrically (the SSD scan's exp(A·Δ)
// factors and the states they shrink) produce numbers below 2^-126 as a
// matter of course, and x86 cores take a microcode assist on every
// operation that reads or makes one: on an Intel Xeon the Mamba-2 f32
// prefill went from 447 to 720 tok/s when the scan flushed them
// (bench/README.md). Those values are below 1.2e-38 and add nothing to
// sums of values near 1, so such kernels flush them, in every task,
// whichever thread runs it (the pool's workers keep their own MXCSR), so
// that a result does not depend on the thread count. The bf16 products
// (vdpbf16ps, AMX) flush them by definition.
#ifndef TWICE_KERNELS_CPU_FLUSH_DENORMALS_H_
#define TWICE_KERNELS_CPU_FLUSH_DENORMALS_H_

#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace twice::kernels::cpu {

class ScopedFlushDenormals {
 public:
#if defined(__x86_64__) || defined(__SSE__)
  ScopedFlushDenormals() : saved_(_mm_getcsr()) {
    _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero);
  }
  // Only the two bits go back: exception flags the scope raised stay
  // raised for a caller that tests them.
  ~ScopedFlushDenormals() {
    constexpr unsigned kBits = kFlushToZero | kDenormalsAreZero;
    _mm_setcsr((_mm_getcsr() & ~kBits) | (saved_ & kBits));
  }
#else
  // Elsewhere denormals keep their IEEE meaning (and their speed).
  ScopedFlushDenormals() = default;
#endif
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
#if defined(__x86_64__) || defined(__SSE__)
  static constexpr unsigned kFlushToZero = 0x8000;
  static constexpr unsigned kDenormalsAreZero = 0x0040;
  unsigned saved_;
#endif
};

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_FLUSH_DENORMALS_H_
