// ScopedFlushDenormals (kernels/cpu/flush_denormals.h): inside the scope a
// product that would be denormal is zero and a denormal input counts as
// zero; on leaving it the thread's floating-point mode is what it was, also
// after the kernels that flush (the SSD scan and step), whose decayed
// states come out 0, not denormal.
#include "kernels/cpu/flush_denormals.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/ssd_chunk_scan.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace twice::kernels {
namespace {

#if defined(__x86_64__)

// MXCSR without its six exception flags: the mode (rounding, masks, FTZ,
// DAZ), which the scope restores; flags raised inside stay raised.
unsigned FloatMode() { return _mm_getcsr() & ~0x3Fu; }

// Operands the compiler cannot fold: the products run on the CPU.
volatile float small = 1e-20f;  // small * small = 1e-40: denormal
volatile float denormal = 1e-39f;
volatile float one = 1.0f;

TEST(FlushDenormalsTest, InsideTheScopeDenormalsAreZero) {
  ASSERT_EQ(std::fpclassify(small * small), FP_SUBNORMAL);
  ASSERT_EQ(denormal * one, denormal);
  {
    const cpu::ScopedFlushDenormals flush;
    EXPECT_EQ(small * small, 0.0f);   // flushed result
    EXPECT_EQ(denormal * one, 0.0f);  // denormal input read as zero
    EXPECT_EQ(small * one, 1e-20f);   // normal values unchanged
  }
  EXPECT_EQ(std::fpclassify(small * small), FP_SUBNORMAL);
  EXPECT_EQ(denormal * one, denormal);
}

TEST(FlushDenormalsTest, NestedScopesRestoreTheModeTheyFound) {
  const unsigned before = FloatMode();
  {
    const cpu::ScopedFlushDenormals outer;
    const unsigned flushing = FloatMode();
    EXPECT_NE(flushing, before);
    {
      const cpu::ScopedFlushDenormals inner;
      EXPECT_EQ(FloatMode(), flushing);
    }
    EXPECT_EQ(FloatMode(), flushing);
  }
  EXPECT_EQ(FloatMode(), before);
}

TEST(FlushDenormalsTest, ExceptionFlagsRaisedInsideStayRaised) {
  constexpr unsigned kUnderflow = 0x10;
  _mm_setcsr(_mm_getcsr() & ~0x3Fu);  // no flag raised yet
  {
    const cpu::ScopedFlushDenormals flush;
    EXPECT_EQ(small * small, 0.0f);  // flushed: an underflow
  }
  EXPECT_NE(_mm_getcsr() & kUnderflow, 0u);
}

// The SSD kernels flush inside their tasks only: the caller's thread keeps
// IEEE denormals, serial and pooled.
TEST(FlushDenormalsTest, SsdKernelsLeaveTheCallersModeAlone) {
  for (int64_t heads : {2, 64}) {  // 64 heads x 8 x 128: the pool steps
    const SsdShape shape{heads, 8, 1, 128};
    const int64_t tokens = 40;
    const int64_t hp = shape.heads * shape.head_dim;
    const int64_t stride = hp + 2 * shape.groups * shape.state;
    std::vector<float> xbc(tokens * stride, 0.5f), dt(tokens * heads, 0.5f),
        a(heads, -30.0f), d(heads, 1.0f),
        state(heads * shape.head_dim * shape.state, 1.0f), y(tokens * hp);
    const unsigned before = FloatMode();
    const absl::Span<const float> x = xbc;
    ASSERT_TRUE(SsdChunkScan(shape, tokens, 16, x, stride, x.subspan(hp),
                             x.subspan(hp + shape.state), stride, dt, a, d,
                             absl::MakeSpan(state), absl::MakeSpan(y))
                    .ok());
    EXPECT_EQ(FloatMode(), before);
    ASSERT_TRUE(SsdStep(shape, x.subspan(0, hp), x.subspan(hp, shape.state),
                        x.subspan(hp + shape.state, shape.state),
                        absl::MakeConstSpan(dt).subspan(0, heads), a, d,
                        absl::MakeSpan(state), absl::MakeSpan(y).subspan(0, hp))
                    .ok());
    EXPECT_EQ(FloatMode(), before);
    EXPECT_EQ(std::fpclassify(small * small), FP_SUBNORMAL);
  }
}

// A state decayed by e^-90 (8e-40, a denormal) is 0 after the scan and
// after a step, on the pool and on the caller: the kernels flush.
TEST(FlushDenormalsTest, SsdStatesDecayToZeroNotToDenormals) {
  for (int64_t heads : {2, 64}) {
    SCOPED_TRACE(heads);
    const SsdShape shape{heads, 8, 1, 128};
    const int64_t tokens = 9;
    const int64_t hp = shape.heads * shape.head_dim;
    const int64_t stride = hp + 2 * shape.state;
    // No input (x = 0): the state only decays, by e^(A·Δ) per token.
    const std::vector<float> xbc(tokens * stride, 0.0f);
    const absl::Span<const float> x = xbc;
    const std::vector<float> d(heads, 1.0f);
    std::vector<float> y(tokens * hp);
    const auto expect_flushed = [](const std::vector<float>& state) {
      for (float v : state) {
        ASSERT_NE(std::fpclassify(v), FP_SUBNORMAL);
        ASSERT_EQ(v, 0.0f);
      }
    };
    // The scan: 9 tokens of Δ = 1, A = -10 (e^-90 over the call).
    std::vector<float> state(heads * shape.head_dim * shape.state, 1.0f);
    const std::vector<float> dt(tokens * heads, 1.0f), a(heads, -10.0f);
    ASSERT_TRUE(SsdChunkScan(shape, tokens, 16, x, stride, x.subspan(hp),
                             x.subspan(hp + shape.state), stride, dt, a, d,
                             absl::MakeSpan(state), absl::MakeSpan(y))
                    .ok());
    expect_flushed(state);
    // A step of decay e^-90.
    std::fill(state.begin(), state.end(), 1.0f);
    const std::vector<float> step_a(heads, -90.0f);
    ASSERT_TRUE(SsdStep(shape, x.subspan(0, hp), x.subspan(hp, shape.state),
                        x.subspan(hp + shape.state, shape.state),
                        absl::MakeConstSpan(dt).subspan(0, heads), step_a, d,
                        absl::MakeSpan(state), absl::MakeSpan(y).subspan(0, hp))
                    .ok());
    expect_flushed(state);
  }
}

#else

TEST(FlushDenormalsTest, InsideTheScopeDenormalsAreZero) {
  GTEST_SKIP() << "denormals are flushed on x86-64 only";
}

#endif

}  // namespace
}  // namespace twice::kernels
