// The Llama, RAT and Nemotron-H engines (f32) against their float64
// references (tests/data/golden/llama*, rat* and nemotron_h*, made by
// tools/reference/make_golden_llama_rat.py):
//   llama: tools/reference/llama.py; d 16, 2 layers, 4 query heads over 2 KV
//     heads (hd 4), SwiGLU width 32, untied head, F16 weights, vocabulary
//     250.
//   rat: tools/reference/rat.py; the interleaved RAT-SWA variant, d 16, 3
//     layers (RAT, SWA with window 3, RAT), 4 heads (hd 4) over 2 q/k
//     groups, chunk L 4, GELU FFN width 32, tied head, F16 weights. The
//     reference's prefill is the training form (flex-style inter-chunk
//     attention merged with the own key by log-sum-exp, §2.4 step 7) and its
//     step the decode form (chunk cache, §2.6); both produced the golden
//     data and agree with each other.
//   nemotron_h: tools/reference/nemotron_h.py; d 16, 4 layers (Mamba-2,
//     attention, Mamba-2, MLP): Mamba 4 heads of P 4 over 2 groups, N 8,
//     K 4, SSD chunk 4; attention 4 heads over 2 KV heads (hd 4), no
//     positional encoding; relu² MLP width 32; untied head, F16 weights;
//     config.json with Python's Infinity in time_step_limit. The reference's
//     prefill is the chunked SSD and its step the recurrence.
//   granite_hybrid: tools/reference/granite_hybrid.py; Granite-4.0-H dense,
//     d 16, 3 layers (mamba, attention, mamba) each with the shared SwiGLU
//     MLP 32; Mamba 4 heads of P 8 over 2 groups, N 8, chunk 4; attention 4
//     heads over 2 KV heads, no positional encoding, softmax scale 0.3;
//     embedding 2, residual 0.5 and logits 1/1.5 multipliers; tied head.
//   granite_moe: the same Granite-4.0-H with experts: the shared MLP 16
//     plus 4 SwiGLU experts of width 8, 2 per token (top-2 raw router
//     logits, softmax over the two); the generator refuses weights where
//     any token's 2nd and 3rd router logits are within 1e-3 (f32 must route
//     as float64 does).
//
// Checked for both: last-position logits and full states after prefill
// (KV, chunk-KV and window), every prefill length (for RAT most are not a
// whole number of chunks), steps from an empty state, teacher-forced steps
// after prefill, segment-by-segment prefill (across chunk edges), greedy
// continuations (exact), the invariants of design §3 on longer random reads
// (RAT: splits on and off chunk edges), and UNIMPLEMENTED prefix modes. Per
// architecture: the state size formula (2·T·H_kv·hd per Llama layer, the
// chunk formula per RAT layer), a failed read leaving the state unchanged
// (Llama), block-appendable closed chunks (RAT).
// Tolerances (RelativeError, golden_util.h): logits 1e-4, states 1e-4.
#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/layers/full_kv_state.h"
#include "engine/layers/rat_chunk_kv_state.h"
#include "engine/models/model.h"
#include "engine/runtime/generator.h"
#include "engine/state/state_blocks.h"
#include "gtest/gtest.h"
#include "tests/engine/golden_util.h"
#include "tests/engine/llama_rat_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using testing::GoldenData;
using testing::RelativeError;
using testing::Tokens;

constexpr double kLogitTolerance = 1e-4;
constexpr double kLlamaRatStateTolerance = 1e-4;

struct GoldenModel {
  const char* name;  // golden data prefix
  const char* architecture;
  int num_layers;
  // Split points of the state-passing check.
  std::vector<size_t> state_passing_splits;
};

// gtest prints parameters byte by byte unless told.
void PrintTo(const GoldenModel& model, std::ostream* os) { *os << model.name; }

std::string ModelName(const ::testing::TestParamInfo<GoldenModel>& info) {
  return info.param.name;
}

const GoldenModel kLlama = {"llama", "llama", 2, {1, 13, 32, 69}};
const GoldenModel kRat = {"rat", "rat", 3, {1, 3, 4, 5, 8, 13, 16, 17, 64, 69}};
const GoldenModel kNemotronH = {
    "nemotron_h", "nemotron_h", 4, {1, 3, 4, 5, 13, 32, 69}};
const GoldenModel kGraniteHybrid = {
    "granite_hybrid", "granitemoehybrid", 3, {1, 3, 4, 5, 13, 32, 69}};
const GoldenModel kGraniteMoe = {
    "granite_moe", "granitemoehybrid", 3, {1, 3, 4, 5, 13, 32, 69}};

// One loaded golden set and model per architecture, shared by its tests.
class GoldenLlamaRatTest : public ::testing::TestWithParam<GoldenModel> {
 protected:
  struct Loaded {
    std::unique_ptr<GoldenData> golden;
    std::unique_ptr<Model> model;
    testing::ErrorLog errors;
  };

  static void TearDownTestSuite() {
    if (loaded_ == nullptr) return;
    for (const auto& [name, loaded] : *loaded_) {
      loaded.errors.Print(name.c_str());
    }
    delete loaded_;
    loaded_ = nullptr;
  }
  void SetUp() override {
    if (loaded_ == nullptr) loaded_ = new std::map<std::string, Loaded>();
    auto [it, inserted] = loaded_->try_emplace(GetParam().name);
    if (inserted) {
      it->second.golden = GoldenData::Load(GetParam().name);
      if (it->second.golden != nullptr) {
        it->second.model = testing::LoadOrDie(it->second.golden->model_dir());
      }
    }
    current_ = &it->second;
    ASSERT_NE(current_->golden, nullptr);
    ASSERT_NE(current_->model, nullptr);
  }

  const GoldenData& golden() const { return *current_->golden; }
  const Model& model() const { return *current_->model; }

  void ExpectLogits(const std::vector<float>& got,
                    const std::vector<float>& want) {
    const double err = RelativeError(got, want);
    current_->errors.Logits(err);
    EXPECT_LE(err, kLogitTolerance);
  }
  void ExpectStates(SequenceState& state, const nlohmann::json& c) {
    const double err =
        std::max(golden().StateError(state, c.at("states")),
                 testing::KvStateError(golden(), state, c.at("states")));
    current_->errors.States(err);
    EXPECT_LE(err, kLlamaRatStateTolerance);
  }

 private:
  static std::map<std::string, Loaded>* loaded_;
  Loaded* current_ = nullptr;
};

std::map<std::string, GoldenLlamaRatTest::Loaded>* GoldenLlamaRatTest::loaded_ =
    nullptr;

TEST_P(GoldenLlamaRatTest, LoadsAsItsArchitecture) {
  EXPECT_EQ(model().description().architecture, GetParam().architecture);
  EXPECT_EQ(model().description().num_layers, GetParam().num_layers);
}

TEST_P(GoldenLlamaRatTest, PrefillMatchesReferenceLogitsAndStates) {
  for (const auto& c : golden().cases()) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    auto state = model().NewState();
    auto logits =
        model().Prefill(Tokens(c.at("tokens")), *state, PrefillMode::kCausal);
    ASSERT_OK(logits);
    ExpectLogits(*logits, golden().Values(c, "last_logits"));
    EXPECT_EQ(state->token_count(), c.at("token_count").get<int64_t>());
    ExpectStates(*state, c);
  }
}

TEST_P(GoldenLlamaRatTest, EveryPrefillLengthMatchesReference) {
  const auto& c = golden().Case("causal_32");
  const std::vector<int32_t> tokens = Tokens(c.at("tokens"));
  for (size_t n = 1; n <= tokens.size(); ++n) {
    SCOPED_TRACE(n);
    auto state = model().NewState();
    auto logits = model().Prefill(absl::MakeConstSpan(tokens).first(n), *state,
                                  PrefillMode::kCausal);
    ASSERT_OK(logits);
    ExpectLogits(*logits, golden().Row(c, "all_logits", n - 1));
  }
}

TEST_P(GoldenLlamaRatTest, StepsFromEmptyStateMatchReference) {
  const auto& c = golden().Case("causal_32");
  const std::vector<int32_t> tokens = Tokens(c.at("tokens"));
  auto state = model().NewState();
  for (size_t i = 0; i < tokens.size(); ++i) {
    SCOPED_TRACE(i);
    auto logits = model().Step(tokens[i], *state);
    ASSERT_OK(logits);
    ExpectLogits(*logits, golden().Row(c, "all_logits", i));
  }
  ExpectStates(*state, c);
}

TEST_P(GoldenLlamaRatTest, StepsAfterPrefillMatchReference) {
  for (const auto& c : golden().cases()) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    auto state = model().NewState();
    ASSERT_TRUE(
        model()
            .Prefill(Tokens(c.at("tokens")), *state, PrefillMode::kCausal)
            .ok());
    const std::vector<int32_t> cont = Tokens(c.at("continuation"));
    for (size_t i = 0; i < cont.size(); ++i) {
      auto logits = model().Step(cont[i], *state);
      ASSERT_OK(logits);
      ExpectLogits(*logits, golden().Row(c, "step_logits", i));
    }
  }
}

TEST_P(GoldenLlamaRatTest, SegmentedPrefillMatchesReference) {
  const auto& c = golden().Case("causal_32");
  const std::vector<int32_t> tokens = Tokens(c.at("tokens"));
  auto state = model().NewState();
  size_t begin = 0;
  for (int n : c.at("segments").get<std::vector<int>>()) {
    auto logits = model().Prefill(absl::MakeConstSpan(tokens).subspan(begin, n),
                                  *state, PrefillMode::kCausal);
    ASSERT_OK(logits);
    begin += n;
    ExpectLogits(*logits, golden().Row(c, "all_logits", begin - 1));
  }
  ASSERT_EQ(begin, tokens.size());
  ExpectStates(*state, c);
}

TEST_P(GoldenLlamaRatTest, GreedyContinuationEqualsReference) {
  testing::ExpectGreedyContinuationsOf(model(), golden());
}

TEST_P(GoldenLlamaRatTest, StatePassingIsExact) {
  const std::vector<int32_t> tokens = testing::RandomTokens(70, 249, 7);
  testing::ExpectStatePassingExact(model(), tokens,
                                   GetParam().state_passing_splits, 1e-5);
}

TEST_P(GoldenLlamaRatTest, StepBatchMatchesSteps) {
  testing::ExpectStepBatchMatchesSteps(model(), 1e-5);
}

TEST_P(GoldenLlamaRatTest, CodecRoundTripIsBitIdentical) {
  testing::ExpectCodecRoundTrip(model(), testing::RandomTokens(21, 249, 8));
}

TEST_P(GoldenLlamaRatTest, PrefixModesAreUnimplemented) {
  auto s = model().NewState();
  auto r =
      model().Prefill(std::vector<int32_t>{1, 2}, *s, PrefillMode::kPrefix);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s->token_count(), 0);
}

INSTANTIATE_TEST_SUITE_P(Architectures, GoldenLlamaRatTest,
                         ::testing::Values(kLlama, kRat, kNemotronH,
                                           kGraniteHybrid, kGraniteMoe),
                         ModelName);

// Llama only.
class GoldenLlamaTest : public GoldenLlamaRatTest {};

TEST_P(GoldenLlamaTest, StateSizeIsTwoTimesTokensTimesKvWidth) {
  const int64_t kv_row = 2 * 4;  // H_kv · hd
  auto empty = model().NewState();
  for (int t : {1, 5, 64}) {
    auto s = model().NewState();
    ASSERT_TRUE(
        model()
            .Prefill(testing::RandomTokens(t, 249, t), *s, PrefillMode::kCausal)
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
TEST_P(GoldenLlamaTest, FailedReadLeavesTheStateUnchanged) {
  auto s = model().NewState();
  ASSERT_TRUE(
      model()
          .Prefill(testing::RandomTokens(5, 249, 3), *s, PrefillMode::kCausal)
          .ok());
  const std::vector<float> row(8, 0.5f);
  dynamic_cast<FullKvState&>(s->layer(1)).Append(row.data(), row.data(), 1, 8);
  const std::string before = EncodeState(*s);
  EXPECT_EQ(model().Step(7, *s).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(EncodeState(*s), before);
}

INSTANTIATE_TEST_SUITE_P(Llama, GoldenLlamaTest, ::testing::Values(kLlama),
                         ModelName);

// RAT only.
class GoldenRatTest : public GoldenLlamaRatTest {};

// Per RAT layer 2·D·⌊T/L⌋ + 2·D floats: the fact sheet's 2·D·⌈T/L⌉ + 2·D
// whenever L divides T (see rat_chunk_kv_state.h for the open chunk).
TEST_P(GoldenRatTest, StateSizeMatchesChunkFormula) {
  const int64_t d = 16, l_len = 4;
  auto empty = model().NewState();
  for (int t : {1, 4, 7, 64}) {
    SCOPED_TRACE(t);
    auto s = model().NewState();
    ASSERT_TRUE(
        model()
            .Prefill(testing::RandomTokens(t, 249, t), *s, PrefillMode::kCausal)
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
TEST_P(GoldenRatTest, ClosedChunksAreAppendOnly) {
  const std::vector<int32_t> tokens = testing::RandomTokens(40, 249, 11);
  auto s = model().NewState();
  ASSERT_TRUE(model()
                  .Prefill(absl::MakeConstSpan(tokens).first(18), *s,
                           PrefillMode::kCausal)
                  .ok());
  auto& before = dynamic_cast<RatChunkKvState&>(s->layer(0));
  RatChunkKvState rebuilt(before.chunk_size(), before.dim());
  ASSERT_TRUE(
      rebuilt.AppendClosedRows(before.ClosedRowBytes(0, before.closed_chunks()))
          .ok());
  const std::string old_rows = before.ClosedRowBytes(0, before.closed_chunks());
  ASSERT_TRUE(model()
                  .Prefill(absl::MakeConstSpan(tokens).subspan(18), *s,
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

INSTANTIATE_TEST_SUITE_P(Rat, GoldenRatTest, ::testing::Values(kRat),
                         ModelName);

// Nemotron-H only.
class GoldenNemotronHTest : public GoldenLlamaRatTest {};

// Only the attention layer grows (2 · T · H_kv · hd floats); the Mamba
// layers keep their fixed conv + SSM state and the MLP layer holds nothing.
TEST_P(GoldenNemotronHTest, OnlyTheAttentionLayerGrowsWithTheDocument) {
  const int64_t kv_row = 2 * 4;  // H_kv · hd
  auto empty = model().NewState();
  EXPECT_EQ(empty->layer(3).kind(), "stateless");
  EXPECT_EQ(empty->layer(3).ByteSize(), 0);
  for (int t : {1, 5, 64}) {
    SCOPED_TRACE(t);
    auto s = model().NewState();
    ASSERT_TRUE(
        model()
            .Prefill(testing::RandomTokens(t, 249, t), *s, PrefillMode::kCausal)
            .ok());
    auto& kv = dynamic_cast<FullKvState&>(s->layer(1));
    EXPECT_EQ(kv.elements(), 2 * t * kv_row);
    for (int l : {0, 2, 3}) {
      EXPECT_EQ(s->layer(l).ByteSize(), empty->layer(l).ByteSize()) << l;
    }
  }
}

// A state extended by more tokens is stored as blocks that carry only the
// new tokens' KV rows plus the fixed-size part; decoding the base's blocks
// followed by the extension's gives the longer state bit for bit.
TEST_P(GoldenNemotronHTest, AnExtensionStoresOnlyTheNewTokensKvRows) {
  const std::vector<int32_t> tokens = testing::RandomTokens(40, 249, 12);
  auto s = model().NewState();
  ASSERT_TRUE(model()
                  .Prefill(absl::MakeConstSpan(tokens).first(30), *s,
                           PrefillMode::kCausal)
                  .ok());
  ASSERT_TRUE(HasBlockRows(*s));
  auto base_blocks = EncodeStateBlocks(*s, {});
  ASSERT_OK(base_blocks);
  const std::vector<int64_t> base_rows = StateRowCounts(*s);
  EXPECT_EQ(base_rows[1], 30);
  ASSERT_TRUE(model()
                  .Prefill(absl::MakeConstSpan(tokens).subspan(30), *s,
                           PrefillMode::kCausal)
                  .ok());
  auto extension = EncodeStateBlocks(*s, base_rows);
  ASSERT_OK(extension);
  ASSERT_EQ(extension->size(), 2u);  // rows, head
  const size_t row_bytes = 2 * 8 * sizeof(float);
  EXPECT_GE((*extension)[0].size(), 10 * row_bytes);
  EXPECT_LT((*extension)[0].size(), 10 * row_bytes + 256);  // + framing
  std::vector<std::string> chain = *base_blocks;
  chain.insert(chain.end(), extension->begin(), extension->end());
  auto back = model().NewState();
  ASSERT_OK(DecodeStateBlocksInto(chain, *back));
  EXPECT_EQ(EncodeState(*back), EncodeState(*s));
  auto a = model().Step(5, *s);
  auto b = model().Step(5, *back);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_EQ(*a, *b);
}

INSTANTIATE_TEST_SUITE_P(NemotronH, GoldenNemotronHTest,
                         ::testing::Values(kNemotronH), ModelName);

}  // namespace
}  // namespace twice::engine
