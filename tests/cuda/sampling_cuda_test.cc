// SampleRows on the device against its CPU twin (kernels/sampling.h) on
// fresh random logits (TWICE_CUDA_TEST_SEED): GPT-2's vocabulary, strided
// rows, exact ties, NaN and -inf, and every kind of rule (greedy,
// temperature, top-k below/above the candidates, top-p, both). The device
// sums weights in another order, so a pick may differ only where the
// uniform or the top-p mass lies within rounding of a boundary; with
// random float logits that has probability ~1e-12 per row, so the test asks
// for the same id on every row.
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_kernel_backend.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/kernel_stats.h"
#include "kernels/sampling.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::cuda {
namespace {

using testing::CudaTest;

struct Rows {
  std::vector<float> logits;
  std::vector<SamplingRule> rules;
  int64_t rows = 0, vocab = 0, stride = 0;
};

Rows RandomRows(uint32_t seed, int64_t rows, int64_t vocab, int64_t stride) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> few(0, 6);
  Rows out{std::vector<float>(static_cast<size_t>(rows * stride), 1e30f),
           {},
           rows,
           vocab,
           stride};
  const float temperatures[] = {0.0f, 0.5f, 1.0f, 1.7f};
  const int32_t top_ks[] = {0, 1, 40, 0, static_cast<int32_t>(vocab) * 2};
  const float top_ps[] = {1.0f, 0.95f, 0.5f, 1e-6f};
  for (int64_t r = 0; r < rows; ++r) {
    float* row = out.logits.data() + r * stride;
    const bool tied = r % 5 == 3;  // a few values: long runs of equal weights
    for (int64_t i = 0; i < vocab; ++i) {
      row[i] = tied ? static_cast<float>(few(rng)) : normal(rng);
    }
    if (r % 7 == 2) {
      for (int n = 0; n < 50; ++n) {
        row[rng() % vocab] = std::numeric_limits<float>::quiet_NaN();
        row[rng() % vocab] = -std::numeric_limits<float>::infinity();
      }
    }
    SamplingRule rule;
    rule.temperature = temperatures[r % 4];
    rule.top_k = top_ks[(r / 4) % 5];
    rule.top_p = top_ps[(r / 20) % 4];
    rule.seed = rng();
    rule.draw = rng() % 4096;
    out.rules.push_back(rule);
  }
  return out;
}

std::vector<int32_t> OnCpu(const Rows& r) {
  SetKernelBackend(nullptr);
  std::vector<int32_t> ids(static_cast<size_t>(r.rows), -1);
  EXPECT_OK(kernels::SampleRows(r.logits, r.rows, r.stride, r.vocab, r.rules,
                                absl::MakeSpan(ids)));
  return ids;
}

using SamplingCudaTest = CudaTest;

TEST_F(SamplingCudaTest, EveryRuleMatchesTheCpuTwin) {
  const Rows r = RandomRows(testing::TestSeed(), 80, 50257, 50304);
  const std::vector<int32_t> want = OnCpu(r);
  DeviceBuffer logits = Put(r.logits);
  DeviceBuffer ids = Zeros<int32_t>(r.rows);
  ASSERT_OK(SampleRows(*stream_, *allocator_, logits.span<float>(), r.rows,
                       r.stride, r.vocab, r.rules, ids.span<int32_t>()));
  const std::vector<int32_t> got = Get<int32_t>(ids);
  for (int64_t i = 0; i < r.rows; ++i) {
    const SamplingRule& rule = r.rules[i];
    EXPECT_EQ(got[i], want[i])
        << "row " << i << " T " << rule.temperature << " top_k " << rule.top_k
        << " top_p " << rule.top_p << " draw " << rule.draw;
  }
}

TEST_F(SamplingCudaTest, BadRulesAndSizesAreRefusedBeforeALaunch) {
  DeviceBuffer logits = Zeros<float>(100);
  DeviceBuffer ids = Zeros<int32_t>(2);
  SamplingRule ok, bad;
  bad.temperature = -1.0f;
  const SamplingRule rules[] = {ok, bad};
  EXPECT_EQ(SampleRows(*stream_, *allocator_, logits.span<float>(), 2, 50, 50,
                       rules, ids.span<int32_t>())
                .code(),
            absl::StatusCode::kInvalidArgument);
  const SamplingRule good[] = {ok, ok};
  EXPECT_EQ(SampleRows(*stream_, *allocator_, logits.span<float>(), 2, 60, 60,
                       good, ids.span<int32_t>())
                .code(),
            absl::StatusCode::kInvalidArgument);  // 2 x 60 > 100 logits
}

// Through the dispatch point: the backend runs the op (counted), so a
// decline to the CPU fails the test instead of comparing the CPU with
// itself.
TEST_F(SamplingCudaTest, TheBackendRunsItOnTheDevice) {
  absl::StatusOr<std::shared_ptr<CudaKernelBackend>> backend =
      CudaKernelBackend::Create(0);
  ASSERT_OK(backend);
  const Rows r = RandomRows(testing::TestSeed() + 1, 24, 32000, 32000);
  const std::vector<int32_t> want = OnCpu(r);
  SetKernelBackend(*backend);
  std::vector<int32_t> got(static_cast<size_t>(r.rows), -1);
  const absl::Status status = kernels::SampleRows(
      r.logits, r.rows, r.stride, r.vocab, r.rules, absl::MakeSpan(got));
  SetKernelBackend(nullptr);
  ASSERT_OK(status);
  EXPECT_EQ(got, want);
  const KernelOpCounts counts = (*backend)->stats().op(KernelOp::kSampleRows);
  EXPECT_EQ(counts.device_calls, 1);
  EXPECT_EQ(counts.cpu_fallbacks, 0);
}

}  // namespace
}  // namespace twice::kernels::cuda
