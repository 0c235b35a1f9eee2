// The Based engine (f32) against golden outputs of the float64 PyTorch
// reference in tools/reference (tests/data/golden/based*, made by
// tools/reference/make_golden.py): a 4-layer model (conv, linear attention
// F 16, sliding window of 4 previous keys, conv; d 16; f16 weights;
// vocabulary 250 padded to 256).
//
// Checked: last-position logits of every prefill, every position of a
// 32-token prompt (by prefill length and by steps from an empty state),
// states after prefill, teacher-forced step logits after prefill,
// segment-by-segment prefill, and greedy continuations (exactly equal).
// Tolerances (RelativeError, see golden_util.h): logits 1e-4, states 1e-4.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/model.h"
#include "engine/runtime/generator.h"
#include "gtest/gtest.h"
#include "tests/engine/golden_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using testing::GoldenData;
using testing::RelativeError;
using testing::Tokens;

constexpr double kStateTolerance = 1e-4;

constexpr char kBasedGolden[] = "based";

using GoldenBasedTest = testing::GoldenSuite<kBasedGolden>;

TEST_F(GoldenBasedTest, PrefillMatchesReferenceLogitsAndStates) {
  for (const auto& c : golden_->cases()) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    auto state = model_->NewState();
    auto logits =
        model_->Prefill(Tokens(c.at("tokens")), *state, PrefillMode::kCausal);
    ASSERT_OK(logits);
    ExpectLogits(*logits, golden_->Values(c, "last_logits"));
    EXPECT_EQ(state->token_count(), c.at("token_count").get<int64_t>());
    const double err = golden_->StateError(*state, c.at("states"));
    errors_.States(err);
    EXPECT_LE(err, kStateTolerance);
  }
}

TEST_F(GoldenBasedTest, EveryPrefillLengthMatchesReference) {
  const auto& c = golden_->Case("causal_32");
  const std::vector<int32_t> tokens = Tokens(c.at("tokens"));
  for (size_t n = 1; n <= tokens.size(); ++n) {
    SCOPED_TRACE(n);
    auto state = model_->NewState();
    auto logits = model_->Prefill(absl::MakeConstSpan(tokens).first(n), *state,
                                  PrefillMode::kCausal);
    ASSERT_OK(logits);
    ExpectLogits(*logits, golden_->Row(c, "all_logits", n - 1));
  }
}

TEST_F(GoldenBasedTest, StepsFromEmptyStateMatchReference) {
  const auto& c = golden_->Case("causal_32");
  const std::vector<int32_t> tokens = Tokens(c.at("tokens"));
  auto state = model_->NewState();
  for (size_t i = 0; i < tokens.size(); ++i) {
    SCOPED_TRACE(i);
    auto logits = model_->Step(tokens[i], *state);
    ASSERT_OK(logits);
    ExpectLogits(*logits, golden_->Row(c, "all_logits", i));
  }
}

TEST_F(GoldenBasedTest, StepsAfterPrefillMatchReference) {
  for (const auto& c : golden_->cases()) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    auto state = model_->NewState();
    ASSERT_TRUE(
        model_->Prefill(Tokens(c.at("tokens")), *state, PrefillMode::kCausal)
            .ok());
    const std::vector<int32_t> cont = Tokens(c.at("continuation"));
    for (size_t i = 0; i < cont.size(); ++i) {
      auto logits = model_->Step(cont[i], *state);
      ASSERT_OK(logits);
      ExpectLogits(*logits, golden_->Row(c, "step_logits", i));
    }
  }
}

TEST_F(GoldenBasedTest, SegmentedPrefillMatchesReference) {
  const auto& c = golden_->Case("causal_32");
  const std::vector<int32_t> tokens = Tokens(c.at("tokens"));
  auto state = model_->NewState();
  size_t begin = 0;
  for (int n : c.at("segments").get<std::vector<int>>()) {
    auto logits = model_->Prefill(absl::MakeConstSpan(tokens).subspan(begin, n),
                                  *state, PrefillMode::kCausal);
    ASSERT_OK(logits);
    begin += n;
    ExpectLogits(*logits, golden_->Row(c, "all_logits", begin - 1));
  }
  ASSERT_EQ(begin, tokens.size());
  const double err = golden_->StateError(*state, c.at("states"));
  errors_.States(err);
  EXPECT_LE(err, kStateTolerance);
}

TEST_F(GoldenBasedTest, GreedyContinuationEqualsReference) {
  ExpectGreedyContinuations();
}

}  // namespace
}  // namespace twice::engine
