// Sampler: greedy, reproducibility, top-k/top-p limits, and the empirical
// distribution against the softmax it should draw from.
#include "engine/sampling/sampler.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

SamplingParams Params(float temperature, int32_t top_k = 0, float top_p = 1.0f,
                      uint64_t seed = 7) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.seed = seed;
  return p;
}

std::vector<double> Softmax(const std::vector<float>& logits, double t) {
  double max = -std::numeric_limits<double>::infinity();
  for (const float l : logits) max = std::max<double>(max, l);
  std::vector<double> p;
  double total = 0;
  for (const float l : logits) {
    p.push_back(std::exp((l - max) / t));
    total += p.back();
  }
  for (double& x : p) x /= total;
  return p;
}

// The sampled id, or -1 (and a failure) on an error.
int32_t Pick(Sampler& sampler, absl::Span<const float> logits, int32_t vocab) {
  absl::StatusOr<int32_t> id = sampler.Sample(logits, vocab);
  EXPECT_OK(id);
  return id.ok() ? *id : -1;
}

// Draws `n` samples and checks each id's frequency against `expected`
// within 5 standard deviations of a binomial count (a false failure is
// then about one in a million per id).
void ExpectFrequencies(Sampler& sampler, const std::vector<float>& logits,
                       const std::vector<double>& expected, int n) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    const int32_t id =
        Pick(sampler, logits, static_cast<int32_t>(logits.size()));
    ASSERT_GE(id, 0);
    ASSERT_LT(id, static_cast<int32_t>(logits.size()));
    ++counts[id];
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    const double p = expected[i];
    const double tolerance = 5 * std::sqrt(p * (1 - p) / n) + 1e-12;
    EXPECT_NEAR(static_cast<double>(counts[i]) / n, p, tolerance) << "id " << i;
  }
}

const std::vector<float> kLogits = {1.0f, 2.5f, -0.5f, 3.0f, 0.0f, 2.9f};

TEST(SamplerTest, GreedyIsArgmax) {
  Sampler sampler(Params(0.0f));
  EXPECT_EQ(Pick(sampler, kLogits, 6), 3);
  EXPECT_EQ(Pick(sampler, std::vector<float>{-5, -1, -3}, 3), 1);
}

TEST(SamplerTest, GreedyTiesGoToLowestId) {
  Sampler sampler(Params(0.0f));
  EXPECT_EQ(Pick(sampler, std::vector<float>{1, 4, 2, 4, 4}, 5), 1);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Pick(sampler, std::vector<float>{-inf, -inf, -inf}, 3), 0);
}

TEST(SamplerTest, NanIsNeverPicked) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {nan, 0.0f, nan, -1.0f};
  Sampler greedy(Params(0.0f));
  EXPECT_EQ(Pick(greedy, logits, 4), 1);
  Sampler sampler(Params(1.0f));
  for (int i = 0; i < 1000; ++i) {
    const int32_t id = Pick(sampler, logits, 4);
    EXPECT_TRUE(id == 1 || id == 3) << id;
  }
}

TEST(SamplerTest, SameSeedSameDraws) {
  Sampler a(Params(1.0f, 0, 1.0f, 42));
  Sampler b(Params(1.0f, 0, 1.0f, 42));
  Sampler c(Params(1.0f, 0, 1.0f, 43));
  int differ = 0;
  for (int i = 0; i < 1000; ++i) {
    const int32_t x = Pick(a, kLogits, 6);
    EXPECT_EQ(x, Pick(b, kLogits, 6));
    differ += x != Pick(c, kLogits, 6);
  }
  EXPECT_GT(differ, 100);  // another seed gives another sequence
}

TEST(SamplerTest, TopKOneIsGreedy) {
  Sampler sampler(Params(1.5f, 1));
  for (int i = 0; i < 500; ++i) ASSERT_EQ(Pick(sampler, kLogits, 6), 3);
  // Ties still resolve to the lowest id.
  const std::vector<float> tied = {0, 5, 5, 1};
  for (int i = 0; i < 500; ++i) ASSERT_EQ(Pick(sampler, tied, 4), 1);
}

TEST(SamplerTest, TinyTopPIsGreedy) {
  Sampler sampler(Params(1.0f, 0, 1e-6f));
  for (int i = 0; i < 500; ++i) ASSERT_EQ(Pick(sampler, kLogits, 6), 3);
}

TEST(SamplerTest, TemperatureOneMatchesSoftmax) {
  Sampler sampler(Params(1.0f, 0, 1.0f, 2024));
  ExpectFrequencies(sampler, kLogits, Softmax(kLogits, 1.0), 200000);
}

TEST(SamplerTest, TemperatureScalesLogits) {
  Sampler sampler(Params(0.5f, 0, 1.0f, 5));
  ExpectFrequencies(sampler, kLogits, Softmax(kLogits, 0.5), 200000);
}

TEST(SamplerTest, TopKRenormalizesOverKept) {
  // The three largest are ids 3, 5, 1.
  Sampler sampler(Params(1.0f, 3, 1.0f, 11));
  std::vector<double> expected =
      Softmax({kLogits[1], kLogits[3], kLogits[5]}, 1);
  ExpectFrequencies(sampler, kLogits,
                    {0, expected[0], 0, expected[1], 0, expected[2]}, 100000);
}

TEST(SamplerTest, TopPKeepsSmallestPrefixReachingP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: top_p 0.7 keeps the first two.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f),
                                     std::log(0.15f), std::log(0.05f)};
  Sampler sampler(Params(1.0f, 0, 0.7f, 3));
  ExpectFrequencies(sampler, logits, {0.625, 0.375, 0, 0}, 100000);
}

TEST(SamplerTest, PaddedRowsAreNeverSampled) {
  // Rows past vocab_size hold the largest logits, as an untrained padding
  // row might.
  const std::vector<float> logits = {0.1f, 0.2f, 0.3f, 0.0f, 50.0f, 60.0f};
  Sampler greedy(Params(0.0f));
  EXPECT_EQ(Pick(greedy, logits, 4), 2);
  Sampler sampler(Params(2.0f, 0, 1.0f, 9));
  for (int i = 0; i < 5000; ++i) ASSERT_LT(Pick(sampler, logits, 4), 4);
}

TEST(SamplerTest, ValidateAcceptsDefaultsAndLimits) {
  EXPECT_OK(SamplingParams().Validate());
  EXPECT_OK(Params(0.7f, 40, 0.95f).Validate());
  EXPECT_OK(Params(0.0f, 0, 1.0f).Validate());
}

TEST(SamplerTest, ValidateRejectsBadParams) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const SamplingParams& p :
       {Params(-0.1f), Params(inf), Params(nan), Params(1.0f, -1),
        Params(1.0f, 0, 0.0f), Params(1.0f, 0, -0.5f), Params(1.0f, 0, 1.01f),
        Params(1.0f, 0, nan)}) {
    EXPECT_EQ(p.Validate().code(), absl::StatusCode::kInvalidArgument)
        << p.temperature << " " << p.top_k << " " << p.top_p;
  }
}

}  // namespace
}  // namespace twice::engine
