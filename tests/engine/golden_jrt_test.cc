// The JRT-RNN engine (f32) against golden outputs of the float64 PyTorch
// reference in tools/reference (tests/data/golden/jrt*, made by
// tools/reference/make_golden.py): a 4-layer model (conv, prefix linear
// attention, sliding window of 4 previous keys, prefix linear attention;
// d 16; F 16; bf16 weights, loaded as f32 like every golden model;
// encoder length M 16; pad token 220).
//
// Cases: prefix reads with N < M (left-padded to M, pads masked), N = M,
// N > M; Read-2x padded and unpadded; an unpadded prefix read with N < M; a
// causal read. Checked: last-position logits, states after the read,
// teacher-forced step logits, greedy continuations (exactly equal), and a
// prefix read of the first M tokens followed by a causal read of the rest
// against the whole prefix read.
// Tolerances (RelativeError, see golden_util.h): logits 1e-4, states 1e-4.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/model.h"
#include "engine/sampling/sampler.h"
#include "gtest/gtest.h"
#include "tests/engine/golden_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using testing::GoldenData;
using testing::RelativeError;
using testing::Tokens;

constexpr double kJrtStateTolerance = 1e-4;

// The engine mode that reproduces a case: prefix reads get the document and
// pad or repeat it themselves; causal reads get the tokens.
PrefillMode ModeOf(const nlohmann::json& c) {
  if (c.at("mode") == "causal") return PrefillMode::kCausal;
  if (c.at("read_twice").get<bool>()) return PrefillMode::kPrefixReadTwice;
  if (!c.at("pad").get<bool>()) return PrefillMode::kPrefixUnpadded;
  return PrefillMode::kPrefix;
}

std::vector<int32_t> InputOf(const nlohmann::json& c) {
  return Tokens(c.at("mode") == "causal" ? c.at("tokens") : c.at("document"));
}

constexpr char kJrtGolden[] = "jrt";

class GoldenJrtTest : public testing::GoldenSuite<kJrtGolden> {
 protected:
  static void ExpectStates(SequenceState& state, const nlohmann::json& c) {
    const double err = golden_->StateError(state, c.at("states"));
    errors_.States(err);
    EXPECT_LE(err, kJrtStateTolerance);
  }

  // A state after the case's read; its logits in `logits`.
  static std::unique_ptr<SequenceState> Read(const nlohmann::json& c,
                                             std::vector<float>& logits) {
    auto state = model_->NewState();
    auto got = model_->Prefill(InputOf(c), *state, ModeOf(c));
    EXPECT_OK(got);
    if (got.ok()) logits = *std::move(got);
    return state;
  }
};

TEST_F(GoldenJrtTest, DescribesThePrefixEncoder) {
  EXPECT_EQ(model_->description().architecture, "jrt");
  EXPECT_EQ(model_->description().prefix_length,
            golden_->manifest().at("enc_length").get<int64_t>());
}

TEST_F(GoldenJrtTest, PrefillMatchesReferenceLogitsAndStates) {
  for (const auto& c : golden_->cases()) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    std::vector<float> logits;
    auto state = Read(c, logits);
    ExpectLogits(logits, golden_->Values(c, "last_logits"));
    // Pads and the second read count as read tokens.
    EXPECT_EQ(state->token_count(), c.at("token_count").get<int64_t>());
    ExpectStates(*state, c);
  }
}

TEST_F(GoldenJrtTest, StepsAfterPrefillMatchReference) {
  for (const auto& c : golden_->cases()) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    std::vector<float> logits;
    auto state = Read(c, logits);
    const std::vector<int32_t> cont = Tokens(c.at("continuation"));
    for (size_t i = 0; i < cont.size(); ++i) {
      auto got = model_->Step(cont[i], *state);
      ASSERT_OK(got);
      ExpectLogits(*got, golden_->Row(c, "step_logits", i));
    }
  }
}

TEST_F(GoldenJrtTest, GreedyContinuationEqualsReference) {
  const int32_t vocab = model_->description().vocab_size;
  for (const auto& c : golden_->cases()) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const std::vector<int32_t> want = Tokens(c.at("greedy"));
    std::vector<float> logits;
    auto state = Read(c, logits);
    Sampler greedy(SamplingParams{});  // temperature 0
    std::vector<int32_t> got;
    while (got.size() < want.size()) {
      absl::StatusOr<int32_t> token = greedy.Sample(logits, vocab);
      ASSERT_OK(token);
      got.push_back(*token);
      if (got.size() == want.size()) break;
      auto next = model_->Step(got.back(), *state);
      ASSERT_OK(next);
      logits = *std::move(next);
    }
    EXPECT_EQ(got, want);
  }
}

TEST_F(GoldenJrtTest, PrefixThenCausalSegmentsMatchWholePrefixRead) {
  const auto& c = golden_->Case("prefix_long_27");
  const std::vector<int32_t> doc = Tokens(c.at("document"));
  const std::vector<int> segments = c.at("segments").get<std::vector<int>>();
  ASSERT_EQ(segments.size(), 2u);
  auto state = model_->NewState();
  const auto span = absl::MakeConstSpan(doc);
  ASSERT_TRUE(
      model_->Prefill(span.first(segments[0]), *state, PrefillMode::kPrefix)
          .ok());
  auto logits =
      model_->Prefill(span.subspan(segments[0]), *state, PrefillMode::kCausal);
  ASSERT_OK(logits);
  ExpectLogits(*logits, golden_->Values(c, "last_logits"));
  EXPECT_EQ(state->token_count(), c.at("token_count").get<int64_t>());
  ExpectStates(*state, c);
}

}  // namespace
}  // namespace twice::engine
