// SampleRows against a float64 reference written the plain way (every
// candidate sorted most likely first, prefixes cut, the kept ids drawn from
// in id order), on random logits with ties, NaN and -inf, random rules and
// strided rows; plus the properties a decode batch relies on.
#include "kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/sampling_uniform.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels {
namespace {

int32_t ReferenceSample(const float* logits, int64_t vocab,
                        const SamplingRule& rule) {
  std::vector<double> l(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) {
    l[i] = std::isnan(logits[i]) ? -std::numeric_limits<double>::infinity()
                                 : logits[i];
  }
  const int64_t argmax = std::max_element(l.begin(), l.end()) - l.begin();
  if (rule.temperature == 0.0f || !std::isfinite(l[argmax])) {
    return static_cast<int32_t>(argmax);
  }
  struct Candidate {
    int64_t id;
    double w;
  };
  std::vector<Candidate> all;
  for (int64_t i = 0; i < vocab; ++i) {
    const double w = std::exp((l[i] - l[argmax]) / double{rule.temperature});
    if (w > 0.0) all.push_back({i, w});
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Candidate& a, const Candidate& b) {
                     return a.w > b.w;  // stable: ties stay in id order
                   });
  if (rule.top_k > 0 && static_cast<size_t>(rule.top_k) < all.size()) {
    all.resize(static_cast<size_t>(rule.top_k));
  }
  if (rule.top_p < 1.0f) {
    double total = 0.0;
    for (const Candidate& c : all) total += c.w;
    double mass = 0.0;
    size_t keep = 0;
    while (keep < all.size() && mass < double{rule.top_p} * total) {
      mass += all[keep++].w;
    }
    all.resize(std::max<size_t>(keep, 1));
  }
  std::sort(all.begin(), all.end(),
            [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  double total = 0.0;
  for (const Candidate& c : all) total += c.w;
  const double target = SamplingUniform(rule.seed, rule.draw) * total;
  double running = 0.0;
  for (const Candidate& c : all) {
    running += c.w;
    if (target < running) return static_cast<int32_t>(c.id);
  }
  return static_cast<int32_t>(all.back().id);
}

struct Batch {
  std::vector<float> logits;
  std::vector<SamplingRule> rules;
  int64_t rows = 0, vocab = 0, stride = 0;
};

// Logits of a few shapes: wide spread, a handful of values (many exact
// ties), a few NaN and -inf; rules of every kind.
Batch RandomBatch(uint32_t seed, int64_t rows, int64_t vocab, int64_t stride) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> spread(-8.0f, 8.0f);
  std::uniform_int_distribution<int> few(0, 5);
  Batch b{std::vector<float>(static_cast<size_t>(rows * stride), 1e30f),
          {},
          rows,
          vocab,
          stride};
  for (int64_t r = 0; r < rows; ++r) {
    float* row = b.logits.data() + r * stride;
    const bool tied = r % 3 == 1;
    for (int64_t i = 0; i < vocab; ++i) {
      row[i] = tied ? static_cast<float>(few(rng)) : spread(rng);
    }
    if (r % 4 == 2) {
      row[rng() % vocab] = std::numeric_limits<float>::quiet_NaN();
      row[rng() % vocab] = -std::numeric_limits<float>::infinity();
    }
    SamplingRule rule;
    const float temperatures[] = {0.0f, 0.3f, 1.0f, 2.5f};
    rule.temperature = temperatures[rng() % 4];
    const int32_t top_ks[] = {0, 0, 1, 5, static_cast<int32_t>(vocab) + 3};
    rule.top_k = top_ks[rng() % 5];
    const float top_ps[] = {1.0f, 1.0f, 0.9f, 0.5f, 1e-6f};
    rule.top_p = top_ps[rng() % 5];
    rule.seed = rng();
    rule.draw = rng() % 1000;
    b.rules.push_back(rule);
  }
  return b;
}

TEST(SampleRowsTest, MatchesFloat64ReferenceOnRandomRows) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const int64_t vocab = seed % 2 ? 97 : 1000, stride = vocab + 5;
    const Batch b = RandomBatch(seed, 40, vocab, stride);
    std::vector<int32_t> out(b.rows, -1);
    ASSERT_OK(SampleRows(b.logits, b.rows, b.stride, b.vocab, b.rules,
                         absl::MakeSpan(out)));
    for (int64_t r = 0; r < b.rows; ++r) {
      const SamplingRule& rule = b.rules[r];
      EXPECT_EQ(out[r],
                ReferenceSample(b.logits.data() + r * stride, vocab, rule))
          << "seed " << seed << " row " << r << " T " << rule.temperature
          << " top_k " << rule.top_k << " top_p " << rule.top_p;
    }
  }
}

TEST(SampleRowsTest, ABatchRowIsTheRowAlone) {
  const Batch b = RandomBatch(11, 16, 300, 300);
  std::vector<int32_t> batched(b.rows);
  ASSERT_OK(SampleRows(b.logits, b.rows, b.stride, b.vocab, b.rules,
                       absl::MakeSpan(batched)));
  for (int64_t r = 0; r < b.rows; ++r) {
    int32_t alone = -1;
    ASSERT_OK(
        SampleRows(absl::MakeConstSpan(b.logits).subspan(r * b.stride, b.vocab),
                   1, b.vocab, b.vocab, {&b.rules[r], 1}, {&alone, 1}));
    EXPECT_EQ(alone, batched[r]) << "row " << r;
  }
}

TEST(SampleRowsTest, TheDrawIndexIsTheOnlyState) {
  // Flat logits: every id equally likely, so draws 0..n-1 of one seed visit
  // many ids, and repeating a draw index repeats its id.
  const std::vector<float> flat(64, 0.0f);
  SamplingRule rule;
  rule.temperature = 1.0f;
  rule.seed = 99;
  std::vector<int32_t> first;
  for (uint64_t draw = 0; draw < 200; ++draw) {
    rule.draw = draw;
    int32_t id = -1;
    ASSERT_OK(SampleRows(flat, 1, 64, 64, {&rule, 1}, {&id, 1}));
    first.push_back(id);
  }
  std::vector<int32_t> distinct = first;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  EXPECT_GT(distinct.size(), 50u);
  rule.draw = 17;
  int32_t again = -1;
  ASSERT_OK(SampleRows(flat, 1, 64, 64, {&rule, 1}, {&again, 1}));
  EXPECT_EQ(again, first[17]);
}

TEST(SampleRowsTest, UniformIsInUnitIntervalAndSpreadsEvenly) {
  // 10 bins of 100000 draws: each within 5 standard deviations of 10000.
  std::vector<int> bins(10, 0);
  for (uint64_t draw = 0; draw < 100000; ++draw) {
    const double u = SamplingUniform(12345, draw);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ++bins[static_cast<int>(u * 10)];
  }
  for (int count : bins) EXPECT_NEAR(count, 10000, 5 * std::sqrt(9000.0));
  EXPECT_NE(SamplingUniform(1, 0), SamplingUniform(2, 0));
  EXPECT_NE(SamplingUniform(1, 0), SamplingUniform(1, 1));
}

TEST(SampleRowsTest, BadArgumentsAreInvalid) {
  const std::vector<float> logits(20, 0.0f);
  SamplingRule ok;
  std::vector<int32_t> out(2);
  const SamplingRule rules[] = {ok, ok};
  EXPECT_EQ(SampleRows(logits, 2, 10, 11, rules, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);  // stride < vocab
  EXPECT_EQ(SampleRows(logits, 3, 10, 10, rules, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);  // logits too short
  EXPECT_EQ(SampleRows(logits, 2, 10, 10, {&ok, 1}, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);  // one rule for two rows
  SamplingRule bad = ok;
  bad.top_p = 0.0f;
  const SamplingRule with_bad[] = {ok, bad};
  const absl::Status status =
      SampleRows(logits, 2, 10, 10, with_bad, absl::MakeSpan(out));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("top_p"), std::string::npos) << status;
}

}  // namespace
}  // namespace twice::kernels
