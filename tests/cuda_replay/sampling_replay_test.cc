// The CUDA sampling kernel (sampling_cuda.cu) replayed on the CPU
// (cuda_replay.h) against its CPU twin (kernels/sampling.h), in both thread
// orders, on random logits with strided rows, exact ties, NaN and -inf, and
// every kind of rule (greedy, temperature, top-k below and above the
// candidates, top-p, both). As on the device, a pick may differ from the
// CPU's only where a uniform or the top-p mass lies within rounding of a
// boundary (probability ~1e-12 a row), so every row must agree.
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/launch.h"
#include "kernels/sampling.h"
#include "tests/cuda_replay/replay_test_util.h"

namespace twice::cuda_replay {
namespace {

namespace launch = kernels::cuda::launch;
using kernels::SamplingRule;
using testing::kThreadOrders;

TEST(SamplingReplayTest, EveryRuleMatchesTheCpuTwin) {
  const int64_t rows = 40, vocab = 3001, stride = 3008;
  std::mt19937 rng(testing::TestSeed());
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> few(0, 6);
  std::vector<float> logits(rows * stride, 1e30f);  // padding never read
  std::vector<SamplingRule> rules;
  const float temperatures[] = {0.0f, 0.5f, 1.0f, 1.7f};
  const int32_t top_ks[] = {0, 1, 40, 0, static_cast<int32_t>(vocab) * 2};
  const float top_ps[] = {1.0f, 0.95f, 0.5f, 1e-6f};
  for (int64_t r = 0; r < rows; ++r) {
    float* row = logits.data() + r * stride;
    const bool tied = r % 5 == 3;  // a few values: long runs of equal weights
    for (int64_t i = 0; i < vocab; ++i) {
      row[i] = tied ? static_cast<float>(few(rng)) : normal(rng);
    }
    if (r % 7 == 2) {
      for (int n = 0; n < 20; ++n) {
        row[rng() % vocab] = std::numeric_limits<float>::quiet_NaN();
        row[rng() % vocab] = -std::numeric_limits<float>::infinity();
      }
    }
    SamplingRule rule;
    rule.temperature = temperatures[r % 4];
    rule.top_k = top_ks[(r / 4) % 5];
    rule.top_p = top_ps[(r / 20) % 2 + (r % 3 == 0 ? 2 : 0)];
    rule.seed = rng();
    rule.draw = rng() % 4096;
    rules.push_back(rule);
  }
  kernels::SetKernelBackend(nullptr);
  std::vector<int32_t> want(rows, -1);
  ASSERT_TRUE(kernels::SampleRows(logits, rows, stride, vocab, rules,
                                  absl::MakeSpan(want))
                  .ok());
  std::vector<launch::SampleRule> device_rules;
  for (const SamplingRule& r : rules) {
    device_rules.push_back({r.temperature, r.top_k, r.top_p, r.seed, r.draw});
  }
  for (const ThreadOrder order : kThreadOrders) {
    SetThreadOrder(order);
    std::vector<int32_t> got(rows, -1);
    ASSERT_EQ(launch::SampleRows(logits.data(), rows, stride, vocab,
                                 device_rules.data(), got.data(), nullptr),
              cudaSuccess);
    for (int64_t i = 0; i < rows; ++i) {
      EXPECT_EQ(got[i], want[i])
          << "row " << i << " T " << rules[i].temperature << " top_k "
          << rules[i].top_k << " top_p " << rules[i].top_p;
    }
  }
}

}  // namespace
}  // namespace twice::cuda_replay
