// Shared helpers of the replay tests (cuda_replay.h): random inputs with a
// fresh seed per run (TWICE_REPLAY_TEST_SEED fixes it; the seed is
// printed), compared as the device tests compare
// (tests/testing/kernel_comparison.h: the replay computes what the device
// would, so the same tolerances hold).
#ifndef TWICE_TESTS_CUDA_REPLAY_REPLAY_TEST_UTIL_H_
#define TWICE_TESTS_CUDA_REPLAY_REPLAY_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda_replay/replay_control.h"
#include "tests/testing/kernel_comparison.h"

namespace twice::cuda_replay::testing {

using ::twice::testing::kBf16Tolerance;
using ::twice::testing::kF32Tolerance;
using ::twice::testing::kTf32Tolerance;

inline uint32_t TestSeed() {
  static const uint32_t seed =
      ::twice::testing::SeedFromEnvironment("TWICE_REPLAY_TEST_SEED");
  return seed;
}

inline std::vector<float> Random(size_t n, uint32_t salt, float scale = 1.0f) {
  return ::twice::testing::SeededUniform(TestSeed(), n, salt, scale);
}

#define TWICE_EXPECT_REPLAY_REL(got, want, tolerance) \
  EXPECT_LE(::twice::testing::NormRelativeError(got, want), tolerance)

// Both thread orders of the replay (replay_control.h).
inline constexpr ThreadOrder kThreadOrders[] = {ThreadOrder::kIncreasing,
                                                ThreadOrder::kDecreasing};

// Block tables [needed.size(), width] of a paged pool of `blocks` blocks:
// table row s holds needed[s] blocks drawn from a shuffled order of all of
// them, -1 past them.
inline std::vector<int32_t> ShuffledTable(const std::vector<int64_t>& needed,
                                          int64_t width, int64_t blocks,
                                          uint32_t salt) {
  std::vector<int32_t> order(static_cast<size_t>(blocks));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(TestSeed() + salt);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int32_t> table(needed.size() * width, -1);
  size_t next = 0;
  for (size_t s = 0; s < needed.size(); ++s) {
    for (int64_t b = 0; b < needed[s]; ++b)
      table[s * width + b] = order[next++];
  }
  EXPECT_LE(next, order.size());
  return table;
}

// f32 values as bf16 bits (round to nearest even) and back.
inline uint16_t ToBf16Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
inline float RoundedToBf16(float x) {
  const uint32_t bits = uint32_t{ToBf16Bits(x)} << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

}  // namespace twice::cuda_replay::testing

#endif  // TWICE_TESTS_CUDA_REPLAY_REPLAY_TEST_UTIL_H_
