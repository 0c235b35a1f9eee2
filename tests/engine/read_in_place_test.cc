// Reads change states in place (engine/models/state_checks.h), for every
// architecture: a decode step writes into the state's own buffers (no
// per-step copy of the state), and invalid input — a token outside the
// vocabulary in any row of a batch, a layer state whose length disagrees
// with the sequence — is refused before any state changes.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/layers/full_kv_state.h"
#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "engine/state/state_codec.h"
#include "gtest/gtest.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using testing::RandomTokens;
using testing::TempDir;

constexpr int kVocab = 300;

class ReadInPlaceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string tok = dir_.Sub("tokenizer.json");
    testing::WriteFileOrFail(tok, testing::SmallTokenizerJson(kVocab));
    InitModelOptions options;
    options.architecture = GetParam();
    options.preset = "tiny";
    options.out_dir = dir_.Sub("model");
    options.tokenizer_json = tok;
    ASSERT_OK(WriteRandomModel(options));
    model_ = testing::LoadOrDie(options.out_dir);
    ASSERT_NE(model_, nullptr);
  }

  TempDir dir_;
  std::unique_ptr<Model> model_;
};

// Every layer state object stays where it was across a step: a step that
// worked on a copy and moved it back would hand the sequence new layer
// objects.
TEST_P(ReadInPlaceTest, StepWritesIntoTheStatesOwnBuffers) {
  auto state = model_->NewState();
  ASSERT_TRUE(
      model_->Prefill(RandomTokens(20, kVocab, 1), *state, PrefillMode::kCausal)
          .ok());
  std::vector<const LayerState*> layers;
  for (int l = 0; l < state->num_layers(); ++l)
    layers.push_back(&state->layer(l));
  const std::string before = EncodeState(*state);
  ASSERT_OK(model_->Step(5, *state));
  EXPECT_NE(EncodeState(*state), before);  // the step did change it
  for (int l = 0; l < state->num_layers(); ++l) {
    EXPECT_EQ(&state->layer(l), layers[l]) << "layer " << l;
  }
  EXPECT_EQ(state->token_count(), 21);
}

TEST_P(ReadInPlaceTest, InvalidBatchChangesNoState) {
  auto a = model_->NewState();
  auto b = model_->NewState();
  ASSERT_OK(model_->Prefill({1, 2, 3}, *a, PrefillMode::kCausal));
  ASSERT_OK(model_->Prefill({4, 5}, *b, PrefillMode::kCausal));
  const std::string a0 = EncodeState(*a), b0 = EncodeState(*b);
  SequenceState* states[] = {a.get(), b.get()};
  const std::vector<int32_t> tokens = {7, kVocab + 1};  // row 1 is invalid
  EXPECT_EQ(model_->StepBatch(tokens, states).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeState(*a), a0);
  EXPECT_EQ(EncodeState(*b), b0);
  EXPECT_FALSE(a->damaged());
}

INSTANTIATE_TEST_SUITE_P(AllArchitectures, ReadInPlaceTest,
                         ::testing::Values("based", "jrt", "mamba2", "rat",
                                           "llama", "nemotron_h"));

// A layer state that disagrees with the sequence (here: the KV cache of a
// late layer holds a row too many) is found before the first layer reads.
TEST(ReadInPlaceLlamaTest, InconsistentLateLayerIsRefusedBeforeAnyChange) {
  TempDir dir;
  const std::string tok = dir.Sub("tokenizer.json");
  testing::WriteFileOrFail(tok, testing::SmallTokenizerJson(kVocab));
  InitModelOptions options;
  options.architecture = "llama";
  options.preset = "tiny";
  options.out_dir = dir.Sub("model");
  options.tokenizer_json = tok;
  ASSERT_OK(WriteRandomModel(options));
  auto model = testing::LoadOrDie(options.out_dir);
  ASSERT_NE(model, nullptr);
  auto state = model->NewState();
  ASSERT_OK(model->Prefill({1, 2, 3}, *state, PrefillMode::kCausal));
  auto& last =
      dynamic_cast<FullKvState&>(state->layer(state->num_layers() - 1));
  const std::vector<float> row(last.kv_heads() * last.head_dim(), 0.5f);
  last.Append(row.data(), row.data(), 1, static_cast<int64_t>(row.size()));
  const std::string before = EncodeState(*state);
  const absl::Status s = model->Step(7, *state).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("layer"), std::string::npos) << s;
  EXPECT_EQ(EncodeState(*state), before);
  EXPECT_FALSE(state->damaged());
}

}  // namespace
}  // namespace twice::engine
