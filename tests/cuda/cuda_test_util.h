// Shared fixture of the CUDA-vs-CPU tests: a stream and an allocator on
// device 0, or GTEST_SKIP when no GPU is usable (ctest then reports the test
// as skipped, not passed). Inputs are random with a fresh seed per run
// (TWICE_CUDA_TEST_SEED fixes it; the seed is printed), and results are
// compared with the CPU twin by the norm-wise relative error and the
// tolerances of tests/testing/kernel_comparison.h.
#ifndef TWICE_TESTS_CUDA_CUDA_TEST_UTIL_H_
#define TWICE_TESTS_CUDA_CUDA_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/stream.h"
#include "kernels/linear_attention.h"
#include "kernels/taylor_feature_map.h"
#include "tests/testing/carried_linear_attention_state.h"
#include "tests/testing/kernel_comparison.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::cuda::testing {

using ::twice::testing::kBf16Tolerance;
using ::twice::testing::kF32Tolerance;
using ::twice::testing::kTf32Tolerance;

inline uint32_t TestSeed() {
  static const uint32_t seed =
      ::twice::testing::SeedFromEnvironment("TWICE_CUDA_TEST_SEED");
  return seed;
}

inline std::vector<float> Random(size_t n, uint32_t salt, float scale = 1.0f) {
  return ::twice::testing::SeededUniform(TestSeed(), n, salt, scale);
}

// n token ids in [0, vocab), from the run's seed and `salt`.
inline std::vector<int32_t> RandomTokenIds(int64_t n, int32_t vocab,
                                           uint32_t salt) {
  std::mt19937 rng(TestSeed() + salt);
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t& t : out) t = id(rng);
  return out;
}

// Rounds every value to bf16 (so the CPU twin sees the GPU's inputs).
inline std::vector<float> RoundBf16(std::vector<float> v) {
  for (float& x : v) x = FromBf16(ToBf16(x));
  return v;
}

inline std::vector<Bf16> ToBf16Vector(const std::vector<float>& v) {
  std::vector<Bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ToBf16(v[i]);
  return out;
}

inline std::vector<float> FromBf16Vector(const std::vector<Bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = FromBf16(v[i]);
  return out;
}

inline double RelativeError(const std::vector<float>& got,
                            const std::vector<float>& want) {
  return ::twice::testing::NormRelativeError(got, want);
}

// A linear-attention state as after reading `prior` random tokens
// (tests/testing/carried_linear_attention_state.h), from the run's seed.
inline void CarriedLinearAttentionState(int64_t heads, int64_t head_dim,
                                        int64_t f, int64_t prior, uint32_t salt,
                                        std::vector<float>& kv_state,
                                        std::vector<float>& k_state) {
  ::twice::testing::CarriedLinearAttentionState(TestSeed(), heads, head_dim, f,
                                                prior, salt, kv_state, k_state);
}

#define TWICE_EXPECT_REL(got, want, tol)                               \
  do {                                                                 \
    const double twice_rel_ =                                          \
        ::twice::kernels::cuda::testing::RelativeError((got), (want)); \
    EXPECT_LE(twice_rel_, (tol)) << #got " vs " #want;                 \
  } while (false)

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    TestSeed();
    auto stream = Stream::Create(0);
    ASSERT_OK(stream);
    stream_ = std::move(*stream);
    allocator_ = std::make_unique<DeviceAllocator>(0);
  }
  void TearDown() override {
    if (stream_ != nullptr) {
      EXPECT_OK(stream_->Synchronize());
    }
  }

  // Uploads `host` into a new buffer.
  template <typename T>
  DeviceBuffer Put(const std::vector<T>& host) {
    auto buf = allocator_->AllocateArray<T>(static_cast<int64_t>(host.size()));
    EXPECT_OK(buf);
    if (!buf.ok()) return DeviceBuffer();
    EXPECT_OK(Upload(host, buf->template span<T>(), stream_->get()));
    return std::move(*buf);
  }
  DeviceBuffer PutBf16(const std::vector<float>& host) {
    return Put(ToBf16Vector(host));
  }
  template <typename T>
  DeviceBuffer Zeros(int64_t count) {
    return Put(std::vector<T>(static_cast<size_t>(count), T{}));
  }
  // Synchronises, then downloads.
  template <typename T>
  std::vector<T> Get(const DeviceBuffer& buf) {
    EXPECT_OK(stream_->Synchronize());
    std::vector<T> host;
    EXPECT_TRUE(Download(DeviceSpan<const T>(buf.template span<T>()), host,
                         stream_->get())
                    .ok());
    return host;
  }
  std::vector<float> GetBf16(const DeviceBuffer& buf) {
    return FromBf16Vector(Get<Bf16>(buf));
  }

  std::unique_ptr<Stream> stream_;
  std::unique_ptr<DeviceAllocator> allocator_;
};

}  // namespace twice::kernels::cuda::testing

#endif  // TWICE_TESTS_CUDA_CUDA_TEST_UTIL_H_
