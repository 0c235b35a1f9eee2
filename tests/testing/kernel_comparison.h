// What the tests that compare a kernel with its CPU twin share (the CUDA
// device tests, tests/cuda; the CPU replays of the CUDA kernels,
// tests/cuda_replay): a run's seed, random inputs drawn from it, and the
// norm-wise relative error with the tolerances per arithmetic
//   ||got - want||_2 / ||want||_2  <= 1e-2 (bf16 paths), 3e-3 (TF32
// tensor-core products) or 1e-5 (f32).
#ifndef TWICE_TESTS_TESTING_KERNEL_COMPARISON_H_
#define TWICE_TESTS_TESTING_KERNEL_COMPARISON_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace twice::testing {

inline constexpr double kBf16Tolerance = 1e-2;
inline constexpr double kF32Tolerance = 1e-5;
// Products whose inputs the tensor cores round to TF32 (10-bit mantissa,
// 2^-11 relative per input), f32 accumulation.
inline constexpr double kTf32Tolerance = 3e-3;

// The environment variable `name` as a seed, else a fresh one; printed as
// name=seed so a failure can be rerun with it.
inline uint32_t SeedFromEnvironment(const char* name) {
  const char* env = std::getenv(name);
  const uint32_t seed =
      env != nullptr ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10))
                     : std::random_device{}();
  std::printf("%s=%u\n", name, seed);
  return seed;
}

// n values uniform in [-scale, scale), from `seed` and `salt`.
inline std::vector<float> SeededUniform(uint32_t seed, size_t n, uint32_t salt,
                                        float scale = 1.0f) {
  std::mt19937 rng(seed * 2654435761u + salt);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Infinite when the sizes differ or a value is not finite.
inline double NormRelativeError(const std::vector<float>& got,
                                const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double num = 0.0;
  double den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = double{got[i]} - want[i];
    num += d * d;
    den += double{want[i]} * want[i];
  }
  if (!std::isfinite(num)) return INFINITY;
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

}  // namespace twice::testing

#endif  // TWICE_TESTS_TESTING_KERNEL_COMPARISON_H_
