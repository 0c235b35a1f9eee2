// Shared helpers for kernel tests: seeded random inputs and a tolerance
// check of float results against float64 references.
#ifndef TWICE_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
#define TWICE_TESTS_KERNELS_KERNEL_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/threading.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::testing {

// Thread counts the CPU kernels are checked with: 1 (the serial paths),
// 2 and 3 (uneven splits), 8 (more threads than work on small shapes).
inline constexpr int kThreadCounts[] = {1, 2, 3, 8};

// Runs `body` once per thread count, with the kernel pool set to it, and
// leaves the pool at 2 threads.
template <typename Body>
void ForEachThreadCount(Body body) {
  for (int threads : kThreadCounts) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    ASSERT_OK(SetCpuThreads(threads));
    body(threads);
  }
  ASSERT_OK(SetCpuThreads(2));
}

inline std::vector<float> RandomVector(size_t n, uint32_t seed,
                                       float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Every |got[i] - want[i]| <= atol + rtol · |want[i]|.
inline void ExpectClose(const std::vector<float>& got,
                        const std::vector<double>& want, double atol,
                        double rtol, const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i]))
        << what << " at index " << i;
  }
}

}  // namespace twice::kernels::testing

#endif  // TWICE_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
