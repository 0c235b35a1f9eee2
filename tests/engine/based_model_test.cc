// Invariants of design §3 on a tiny random Based model (d 64, layers conv /
// linear attention / sliding window (left extent 32) / conv, 300-token
// WordLevel vocabulary padded to 304), with weights sharpened x10 so the
// attention patterns are far from uniform:
//   1. prefill(a) then step(b) == prefill(a + b)
//   2. prefill(a) then prefill(b) == prefill(a + b), also across the window
//   3. out-of-vocabulary tokens, foreign states and prefix mode are refused
//      and leave the state unchanged.
// Tolerance: logits agree to 2e-5 absolute + 1e-4 relative (float32 sums in
// different orders: chunked vs recurrent linear attention, chunk boundaries).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/model.h"
#include "engine/state/state_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::HasSubstr;
using testing::LoadOrDie;
using testing::RandomTokens;
using testing::TempDir;

constexpr int kVocab = 300;

void ExpectLogitsNear(const std::vector<float>& got,
                      const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_err = 0.0;
  size_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err =
        std::abs(double{got[i]} - want[i]) - 1e-4 * std::abs(double{want[i]});
    if (err > max_err) {
      max_err = err;
      worst = i;
    }
  }
  EXPECT_LE(max_err, 2e-5) << what << ": logit " << worst << " is "
                           << got[worst] << ", expected " << want[worst];
}

class BasedModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ASSERT_OK(testing::WriteTinyModel(dir_->Sub("m"), 7, kVocab));
    ASSERT_OK(testing::SharpenWeights(dir_->Sub("m"), 10.0f));
    model_ = LoadOrDie(dir_->Sub("m")).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete dir_;
  }

  std::vector<float> PrefillFresh(const std::vector<int32_t>& tokens) {
    auto state = model_->NewState();
    auto logits = model_->Prefill(tokens, *state, PrefillMode::kCausal);
    EXPECT_OK(logits);
    return logits.ok() ? *logits : std::vector<float>{};
  }

  static TempDir* dir_;
  static Model* model_;
};

TempDir* BasedModelTest::dir_ = nullptr;
Model* BasedModelTest::model_ = nullptr;

TEST_F(BasedModelTest, DescribesItself) {
  const ModelDescription& d = model_->description();
  EXPECT_EQ(d.architecture, "based");
  EXPECT_EQ(d.fingerprint.size(), 64u);
  EXPECT_EQ(d.vocab_size, kVocab);
  EXPECT_EQ(d.padded_vocab_size, 304);
  EXPECT_EQ(d.eos_token_id, kVocab - 1);
  EXPECT_EQ(d.training_context, 2048);
  EXPECT_EQ(d.num_layers, 4);
  EXPECT_EQ(d.hidden_size, 64);
  EXPECT_EQ(model_->tokenizer().vocab_size(), kVocab);
  auto state = model_->NewState();
  EXPECT_EQ(state->num_layers(), 4);
  EXPECT_EQ(state->layer(0).kind(), "short_conv");
  EXPECT_EQ(state->layer(1).kind(), "linear_attention");
  EXPECT_EQ(state->layer(2).kind(), "sliding_window");
  EXPECT_EQ(state->layer(3).kind(), "short_conv");
}

TEST_F(BasedModelTest, LogitsAreFiniteAndNotConstant) {
  const std::vector<float> logits = PrefillFresh(RandomTokens(20, kVocab, 1));
  ASSERT_EQ(logits.size(), 304u);
  float lo = logits[0], hi = logits[0];
  for (float x : logits) {
    ASSERT_TRUE(std::isfinite(x));
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_GT(hi - lo, 1e-2);
}

TEST_F(BasedModelTest, PrefillThenStepEqualsPrefill) {
  const std::vector<int32_t> tokens = RandomTokens(60, kVocab, 2);
  for (int prefix : {1, 2, 20, 33}) {
    auto state = model_->NewState();
    std::vector<int32_t> a(tokens.begin(), tokens.begin() + prefix);
    ASSERT_OK(model_->Prefill(a, *state, PrefillMode::kCausal));
    for (int i = prefix; i < prefix + 27; ++i) {
      auto stepped = model_->Step(tokens[i], *state);
      ASSERT_OK(stepped);
      ExpectLogitsNear(*stepped,
                       PrefillFresh(std::vector<int32_t>(
                           tokens.begin(), tokens.begin() + i + 1)),
                       "prefix " + std::to_string(prefix) + ", step to " +
                           std::to_string(i + 1));
      EXPECT_EQ(state->token_count(), i + 1);
    }
  }
}

TEST_F(BasedModelTest, StatePassingIsExactAcrossTheWindow) {
  // The sliding window sees 32 previous tokens; splits land before, on and
  // after it, and the second part alone is longer than the window.
  const std::vector<int32_t> tokens = RandomTokens(100, kVocab, 3);
  const std::vector<float> whole = PrefillFresh(tokens);
  for (int split : {1, 5, 31, 32, 33, 40, 64, 65, 99}) {
    auto state = model_->NewState();
    std::vector<int32_t> a(tokens.begin(), tokens.begin() + split);
    std::vector<int32_t> b(tokens.begin() + split, tokens.end());
    ASSERT_OK(model_->Prefill(a, *state, PrefillMode::kCausal));
    auto logits = model_->Prefill(b, *state, PrefillMode::kCausal);
    ASSERT_OK(logits);
    EXPECT_EQ(state->token_count(), 100);
    ExpectLogitsNear(*logits, whole, "split at " + std::to_string(split));
  }
}

TEST_F(BasedModelTest, ThreeSegmentsEqualOne) {
  const std::vector<int32_t> tokens = RandomTokens(90, kVocab, 4);
  auto state = model_->NewState();
  for (auto [begin, end] :
       {std::pair{0, 10}, std::pair{10, 45}, std::pair{45, 90}}) {
    std::vector<int32_t> part(tokens.begin() + begin, tokens.begin() + end);
    auto logits = model_->Prefill(part, *state, PrefillMode::kCausal);
    ASSERT_OK(logits);
    if (end == 90) ExpectLogitsNear(*logits, PrefillFresh(tokens), "3 parts");
  }
}

TEST_F(BasedModelTest, LongPrefillIsChunkedExactly) {
  // Longer than one internal chunk (1024 tokens); a different split must
  // give the same logits.
  const std::vector<int32_t> tokens = RandomTokens(1100, kVocab, 5);
  const std::vector<float> whole = PrefillFresh(tokens);
  auto state = model_->NewState();
  std::vector<int32_t> a(tokens.begin(), tokens.begin() + 700);
  std::vector<int32_t> b(tokens.begin() + 700, tokens.end());
  ASSERT_OK(model_->Prefill(a, *state, PrefillMode::kCausal));
  auto logits = model_->Prefill(b, *state, PrefillMode::kCausal);
  ASSERT_OK(logits);
  ExpectLogitsNear(*logits, whole, "1100 tokens as 700 + 400");
}

TEST_F(BasedModelTest, DecodedStateContinuesIdentically) {
  const std::vector<int32_t> tokens = RandomTokens(50, kVocab, 6);
  auto state = model_->NewState();
  ASSERT_OK(model_->Prefill(tokens, *state, PrefillMode::kCausal));
  auto restored = model_->NewState();
  ASSERT_OK(DecodeStateInto(EncodeState(*state), *restored));
  EXPECT_EQ(restored->token_count(), 50);
  auto a = model_->Step(17, *state);
  auto b = model_->Step(17, *restored);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_EQ(*a, *b);  // same bytes in, same arithmetic: bit-identical
}

TEST_F(BasedModelTest, OutOfVocabularyTokensAreRefusedWithoutSideEffects) {
  auto state = model_->NewState();
  ASSERT_TRUE(
      model_->Prefill(RandomTokens(10, kVocab, 8), *state, PrefillMode::kCausal)
          .ok());
  const std::string before = EncodeState(*state);
  // 300..303 are embedding padding rows: not tokens.
  for (int32_t bad : {-1, kVocab, 303, 304, 1 << 30}) {
    auto p = model_->Prefill({1, 2, bad}, *state, PrefillMode::kCausal);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    auto s = model_->Step(bad, *state);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(EncodeState(*state), before);
  }
  auto empty = model_->Prefill({}, *state, PrefillMode::kCausal);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeState(*state), before);
}

TEST_F(BasedModelTest, PrefixModeNeedsJrt) {
  auto state = model_->NewState();
  auto p = model_->Prefill({1, 2, 3}, *state, PrefillMode::kPrefix);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(p.status().message(), HasSubstr("JRT-RNN"));
  EXPECT_EQ(state->token_count(), 0);
}

TEST_F(BasedModelTest, ForeignStatesAreRefused) {
  TempDir other_dir;
  ASSERT_OK(testing::WriteTinyModel(other_dir.Sub("m"), 8, kVocab));
  std::unique_ptr<Model> other = LoadOrDie(other_dir.Sub("m"));
  ASSERT_NE(other, nullptr);
  ASSERT_NE(other->description().fingerprint,
            model_->description().fingerprint);
  auto foreign = other->NewState();
  auto p = model_->Prefill({1, 2}, *foreign, PrefillMode::kCausal);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(foreign->token_count(), 0);
  auto s = model_->Step(1, *foreign);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(BasedModelTest, SameFilesGiveSameFingerprint) {
  std::unique_ptr<Model> again = LoadOrDie(dir_->Sub("m"));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->description().fingerprint,
            model_->description().fingerprint);
}

}  // namespace
}  // namespace twice::engine
