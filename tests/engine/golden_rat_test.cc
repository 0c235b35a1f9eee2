// The RAT engine (f32) against the float64 reference in
// tools/reference/rat.py (tests/data/golden/rat*, made by
// tools/reference/make_golden_llama_rat.py): the interleaved RAT-SWA
// variant, d 16, 3 layers (RAT, SWA with window 3, RAT), 4 heads (hd 4)
// over 2 q/k groups, chunk L 4, GELU FFN width 32, tied head, F16 weights.
// The reference's prefill is the training form (flex-style inter-chunk
// attention merged with the own key by log-sum-exp, §2.4 step 7) and its
// step the decode form (chunk cache, §2.6); both produced the golden data
// and agree with each other.
//
// Checked: last-position logits and chunk-KV / window states after prefill,
// every prefill length (most are not a whole number of chunks), steps from
// an empty state, teacher-forced steps after prefill, segment-by-segment
// prefill across chunk edges, greedy continuations (exact), the invariants
// of design §3 with splits on and off chunk edges, the state size formula,
// block-appendable closed chunks, and UNIMPLEMENTED prefix modes.
// Tolerances (RelativeError, golden_util.h): logits 1e-4, states 1e-4.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/layers/rat_chunk_kv_state.h"
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
constexpr char kName[] = "rat";

class GoldenRatTest : public ::testing::Test {
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

GoldenData* GoldenRatTest::golden_ = nullptr;
Model* GoldenRatTest::model_ = nullptr;
testing::ErrorLog GoldenRatTest::errors_;

TEST_F(GoldenRatTest, LoadsAsRat) {
  EXPECT_EQ(model_->description().architecture, "rat");
  EXPECT_EQ(model_->description().num_layers, 3);
}

TEST_F(GoldenRatTest, PrefillMatchesReferenceLogitsAndStates) {
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

TEST_F(GoldenRatTest, EveryPrefillLengthMatchesReference) {
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

TEST_F(GoldenRatTest, StepsFromEmptyStateMatchReference) {
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

TEST_F(GoldenRatTest, StepsAfterPrefillMatchReference) {
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

TEST_F(GoldenRatTest, SegmentedPrefillMatchesReference) {
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

TEST_F(GoldenRatTest, GreedyContinuationEqualsReference) {
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

TEST_F(GoldenRatTest, StatePassingIsExact) {
  const std::vector<int32_t> tokens = testing::RandomTokens(70, 249, 7);
  testing::ExpectStatePassingExact(*model_, tokens,
                                   {1, 3, 4, 5, 8, 13, 16, 17, 64, 69}, 1e-5);
}

TEST_F(GoldenRatTest, StepBatchMatchesSteps) {
  testing::ExpectStepBatchMatchesSteps(*model_, 1e-5);
}

TEST_F(GoldenRatTest, CodecRoundTripIsBitIdentical) {
  testing::ExpectCodecRoundTrip(*model_, testing::RandomTokens(21, 249, 8));
}

// Per RAT layer 2·D·⌊T/L⌋ + 2·D floats: the fact sheet's 2·D·⌈T/L⌉ + 2·D
// whenever L divides T (see rat_chunk_kv_state.h for the open chunk).
TEST_F(GoldenRatTest, StateSizeMatchesChunkFormula) {
  const int64_t d = 16, l_len = 4;
  auto empty = model_->NewState();
  for (int t : {1, 4, 7, 64}) {
    SCOPED_TRACE(t);
    auto s = model_->NewState();
    ASSERT_TRUE(model_
                    ->Prefill(testing::RandomTokens(t, 249, t), *s,
                              PrefillMode::kCausal)
                    .ok());
    for (int l : {0, 2}) {  // the RAT layers
      auto& rat = dynamic_cast<RatChunkKvState&>(s->layer(l));
      EXPECT_EQ(rat.elements(), 2 * d * (t / l_len) + 2 * d);
      if (t % l_len == 0) {
        EXPECT_EQ(rat.elements(), 2 * d * ((t + l_len - 1) / l_len) + 2 * d);
      }
      EXPECT_EQ(s->layer(l).ByteSize() - empty->layer(l).ByteSize(),
                static_cast<int64_t>(sizeof(float)) * 2 * d * (t / l_len));
    }
  }
}

// Closed chunks never change: the rows a longer read adds can be appended
// as a block to the rows stored before, giving the longer state's rows.
TEST_F(GoldenRatTest, ClosedChunksAreAppendOnly) {
  const std::vector<int32_t> tokens = testing::RandomTokens(40, 249, 11);
  auto s = model_->NewState();
  ASSERT_TRUE(model_
                  ->Prefill(absl::MakeConstSpan(tokens).first(18), *s,
                            PrefillMode::kCausal)
                  .ok());
  auto& before = dynamic_cast<RatChunkKvState&>(s->layer(0));
  RatChunkKvState rebuilt(before.chunk_size(), before.dim());
  ASSERT_TRUE(
      rebuilt.AppendClosedRows(before.ClosedRowBytes(0, before.closed_chunks()))
          .ok());
  const std::string old_rows = before.ClosedRowBytes(0, before.closed_chunks());
  ASSERT_TRUE(model_
                  ->Prefill(absl::MakeConstSpan(tokens).subspan(18), *s,
                            PrefillMode::kCausal)
                  .ok());
  auto& after = dynamic_cast<RatChunkKvState&>(s->layer(0));
  EXPECT_EQ(after.ClosedRowBytes(0, 4), old_rows);  // 18 tokens: 4 chunks
  ASSERT_TRUE(
      rebuilt.AppendClosedRows(after.ClosedRowBytes(4, after.closed_chunks()))
          .ok());
  EXPECT_EQ(rebuilt.ClosedRowBytes(0, rebuilt.closed_chunks()),
            after.ClosedRowBytes(0, after.closed_chunks()));
  EXPECT_FALSE(rebuilt.AppendClosedRows("abc").ok());
}

TEST_F(GoldenRatTest, PrefixModesAreUnimplemented) {
  auto s = model_->NewState();
  auto r =
      model_->Prefill(std::vector<int32_t>{1, 2}, *s, PrefillMode::kPrefix);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s->token_count(), 0);
}

}  // namespace
}  // namespace twice::engine
