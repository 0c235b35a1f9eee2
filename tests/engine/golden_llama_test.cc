// The Llama engine (f32) against the float64 reference in
// tools/reference/llama.py (tests/data/golden/llama*, made by
// tools/reference/make_golden_llama_rat.py): d 16, 2 layers, 4 query heads
// over 2 KV heads (hd 4), SwiGLU width 32, untied head, F16 weights,
// vocabulary 250.
//
// Checked: last-position logits and full KV states after prefill, every
// prefill length, steps from an empty state, teacher-forced steps after
// prefill, segment-by-segment prefill, greedy continuations (exact), the
// invariants of design §3 on longer random reads, the state size formula
// 2·T·H_kv·hd per layer, and UNIMPLEMENTED prefix modes.
// Tolerances (RelativeError, golden_util.h): logits 1e-4, states 1e-4.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/layers/full_kv_state.h"
#include "engine/models/model.h"
#include "engine/runtime/generator.h"
#include "gtest/gtest.h"
#include "tests/engine/golden_util.h"
#include "tests/engine/llama_rat_test_util.h"

namespace twice::engine {
namespace {

using testing::GoldenData;
using testing::RelativeError;
using testing::Tokens;

constexpr double kLogitTolerance = 1e-4;
constexpr double kStateTolerance = 1e-4;
constexpr char kName[] = "llama";

class GoldenLlamaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    golden_ = GoldenData::Load(kName).release();
    if (golden_ != nullptr) {
      model_ = testing::LoadOrDie(golden_->model_dir()).release();
    }
  }
  static void TearDownTestSuite() {
    errors_.Print(kName);
    delete model_;
    delete golden_;
  }
  void SetUp() override {
    ASSERT_NE(golden_, nullptr);
    ASSERT_NE(model_, nullptr);
  }
  static void ExpectLogits(const std::vector<float>& got,
                           const std::vector<float>& want) {
    const double err = RelativeError(got, want);
    errors_.Logits(err);
    EXPECT_LE(err, kLogitTolerance);
  }
  static void ExpectStates(SequenceState& state, const nlohmann::json& c) {
    const double err =
        std::max(golden_->StateError(state, c.at("states")),
                 testing::KvStateError(*golden_, state, c.at("states")));
    errors_.States(err);
    EXPECT_LE(err, kStateTolerance);
  }

  static GoldenData* golden_;
  static Model* model_;
  static testing::ErrorLog errors_;
};

GoldenData* GoldenLlamaTest::golden_ = nullptr;
Model* GoldenLlamaTest::model_ = nullptr;
testing::ErrorLog GoldenLlamaTest::errors_;

TEST_F(GoldenLlamaTest, LoadsAsLlama) {
  EXPECT_EQ(model_->description().architecture, "llama");
  EXPECT_EQ(model_->description().num_layers, 2);
}

TEST_F(GoldenLlamaTest, PrefillMatchesReferenceLogitsAndStates) {
  for (const auto& c : golden_->cases()) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    auto state = model_->NewState();
    auto logits =
        model_->Prefill(Tokens(c.at("tokens")), *state, PrefillMode::kCausal);
    ASSERT_TRUE(logits.ok()) << logits.status();
    ExpectLogits(*logits, golden_->Values(c, "last_logits"));
    EXPECT_EQ(state->token_count(), c.at("token_count").get<int64_t>());
    ExpectStates(*state, c);
  }
}

TEST_F(GoldenLlamaTest, EveryPrefillLengthMatchesReference) {
  const auto& c = golden_->Case("causal_32");
  const std::vector<int32_t> tokens = Tokens(c.at("tokens"));
  for (size_t n = 1; n <= tokens.size(); ++n) {
    SCOPED_TRACE(n);
    auto state = model_->NewState();
    auto logits = model_->Prefill(absl::MakeConstSpan(tokens).first(n), *state,
                                  PrefillMode::kCausal);
    ASSERT_TRUE(logits.ok()) << logits.status();
    ExpectLogits(*logits, golden_->Row(c, "all_logits", n - 1));
  }
}

TEST_F(GoldenLlamaTest, StepsFromEmptyStateMatchReference) {
  const auto& c = golden_->Case("causal_32");
  const std::vector<int32_t> tokens = Tokens(c.at("tokens"));
  auto state = model_->NewState();
  for (size_t i = 0; i < tokens.size(); ++i) {
    SCOPED_TRACE(i);
    auto logits = model_->Step(tokens[i], *state);
    ASSERT_TRUE(logits.ok()) << logits.status();
    ExpectLogits(*logits, golden_->Row(c, "all_logits", i));
  }
  ExpectStates(*state, c);
}

TEST_F(GoldenLlamaTest, StepsAfterPrefillMatchReference) {
  for (const auto& c : golden_->cases()) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    auto state = model_->NewState();
    ASSERT_TRUE(
        model_->Prefill(Tokens(c.at("tokens")), *state, PrefillMode::kCausal)
            .ok());
    const std::vector<int32_t> cont = Tokens(c.at("continuation"));
    for (size_t i = 0; i < cont.size(); ++i) {
      auto logits = model_->Step(cont[i], *state);
      ASSERT_TRUE(logits.ok()) << logits.status();
      ExpectLogits(*logits, golden_->Row(c, "step_logits", i));
    }
  }
}

TEST_F(GoldenLlamaTest, SegmentedPrefillMatchesReference) {
  const auto& c = golden_->Case("causal_32");
  const std::vector<int32_t> tokens = Tokens(c.at("tokens"));
  auto state = model_->NewState();
  size_t begin = 0;
  for (int n : c.at("segments").get<std::vector<int>>()) {
    auto logits = model_->Prefill(absl::MakeConstSpan(tokens).subspan(begin, n),
                                  *state, PrefillMode::kCausal);
    ASSERT_TRUE(logits.ok()) << logits.status();
    begin += n;
    ExpectLogits(*logits, golden_->Row(c, "all_logits", begin - 1));
  }
  ASSERT_EQ(begin, tokens.size());
  ExpectStates(*state, c);
}

TEST_F(GoldenLlamaTest, GreedyContinuationEqualsReference) {
  for (const auto& c : golden_->cases()) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const std::vector<int32_t> want = Tokens(c.at("greedy"));
    GenerateOptions options;
    options.max_tokens = static_cast<int32_t>(want.size());
    options.stop_at_eos = false;
    std::vector<int32_t> got;
    auto state = model_->NewState();
    auto result = Generate(*model_, *state, Tokens(c.at("tokens")), options,
                           [&got](const GeneratedPiece& piece) {
                             got.insert(got.end(), piece.tokens.begin(),
                                        piece.tokens.end());
                             return true;
                           });
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(got, want);
  }
}

TEST_F(GoldenLlamaTest, StatePassingIsExact) {
  const std::vector<int32_t> tokens = testing::RandomTokens(70, 249, 7);
  testing::ExpectStatePassingExact(*model_, tokens, {1, 13, 32, 69}, 1e-5);
}

TEST_F(GoldenLlamaTest, StepBatchMatchesSteps) {
  testing::ExpectStepBatchMatchesSteps(*model_, 1e-5);
}

TEST_F(GoldenLlamaTest, CodecRoundTripIsBitIdentical) {
  testing::ExpectCodecRoundTrip(*model_, testing::RandomTokens(21, 249, 8));
}

TEST_F(GoldenLlamaTest, StateSizeIsTwoTimesTokensTimesKvWidth) {
  const int64_t kv_row = 2 * 4;  // H_kv · hd
  auto empty = model_->NewState();
  for (int t : {1, 5, 64}) {
    auto s = model_->NewState();
    ASSERT_TRUE(model_
                    ->Prefill(testing::RandomTokens(t, 249, t), *s,
                              PrefillMode::kCausal)
                    .ok());
    for (int l = 0; l < s->num_layers(); ++l) {
      auto& kv = dynamic_cast<FullKvState&>(s->layer(l));
      EXPECT_EQ(kv.elements(), 2 * t * kv_row);
      EXPECT_EQ(s->layer(l).ByteSize() - empty->layer(l).ByteSize(),
                static_cast<int64_t>(sizeof(float)) * 2 * t * kv_row);
    }
  }
}

// A read that fails in a later layer (here: layer 1's cache has one row too
// many) leaves every layer as it was, although layer 0 had already run.
TEST_F(GoldenLlamaTest, FailedReadLeavesTheStateUnchanged) {
  auto s = model_->NewState();
  ASSERT_TRUE(
      model_
          ->Prefill(testing::RandomTokens(5, 249, 3), *s, PrefillMode::kCausal)
          .ok());
  const std::vector<float> row(8, 0.5f);
  dynamic_cast<FullKvState&>(s->layer(1)).Append(row.data(), row.data(), 1, 8);
  const std::string before = EncodeState(*s);
  EXPECT_EQ(model_->Step(7, *s).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(EncodeState(*s), before);
}

TEST_F(GoldenLlamaTest, PrefixModesAreUnimplemented) {
  auto s = model_->NewState();
  auto r =
      model_->Prefill(std::vector<int32_t>{1, 2}, *s, PrefillMode::kPrefix);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s->token_count(), 0);
}

}  // namespace
}  // namespace twice::engine
