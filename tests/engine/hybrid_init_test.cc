// `twice init-model --arch=nemotron_h|granitemoehybrid`
// (engine/models/init_hybrid.h): each tiny preset loads as its hybrid with
// the tokenizer's vocabulary (not padded) and its layer kinds in order, its
// chunked prefill agrees with its recurrent steps, the same seed writes the
// same bytes, and unknown presets are refused by name.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/init_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/golden_util.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

InitModelOptions TinyOptions(const TempDir& tmp, const std::string& out,
                             const std::string& arch = "nemotron_h") {
  InitModelOptions options;
  options.architecture = arch;
  options.out_dir = tmp.Sub(out);
  options.tokenizer_json = tmp.Sub("tok.json");
  options.seed = 5;
  return options;
}

// The chunked prefill (SSD form, attention over the block) against one step
// per token (the recurrence): the last logits agree.
void ExpectPrefillEqualsSteps(const Model& model,
                              const std::vector<int32_t>& tokens) {
  auto state = model.NewState();
  auto logits = model.Prefill(tokens, *state, PrefillMode::kCausal);
  ASSERT_OK(logits);
  auto recurrent = model.NewState();
  std::vector<float> last;
  for (int32_t t : tokens) {
    auto step = model.Step(t, *recurrent);
    ASSERT_OK(step);
    last = *std::move(step);
  }
  EXPECT_LE(testing::RelativeError(last, *logits), 1e-5);
}

TEST(NemotronHInitTest, TinyPresetLoadsAndChunkedEqualsRecurrent) {
  TempDir tmp;
  InitModelOptions options = TinyOptions(tmp, "m");
  testing::WriteFileOrFail(options.tokenizer_json,
                           testing::SmallTokenizerJson(300));
  ASSERT_OK(WriteRandomModel(options));
  std::unique_ptr<Model> model = testing::LoadOrDie(options.out_dir);
  ASSERT_NE(model, nullptr);
  const ModelDescription& d = model->description();
  EXPECT_EQ(d.architecture, "nemotron_h");
  EXPECT_EQ(d.vocab_size, 300);
  EXPECT_EQ(d.padded_vocab_size, 300);
  EXPECT_EQ(d.eos_token_id, 299);
  EXPECT_EQ(d.num_layers, 4);
  EXPECT_EQ(d.hidden_size, 64);
  auto state = model->NewState();
  EXPECT_EQ(state->layer(0).kind(), "mamba2");
  EXPECT_EQ(state->layer(1).kind(), "full_kv");
  EXPECT_EQ(state->layer(2).kind(), "mamba2");
  EXPECT_EQ(state->layer(3).kind(), "stateless");

  // 150 tokens: two full SSD chunks of 64 and a ragged one.
  const std::vector<int32_t> tokens = testing::RandomTokens(150, 300, 9);
  ExpectPrefillEqualsSteps(*model, tokens);

  options.out_dir = tmp.Sub("again");
  ASSERT_OK(WriteRandomModel(options));
  EXPECT_EQ(testing::ReadFileOrEmpty(tmp.Sub("m/model.safetensors")),
            testing::ReadFileOrEmpty(tmp.Sub("again/model.safetensors")));
}

TEST(GraniteHybridInitTest, TinyPresetLoadsAndChunkedEqualsRecurrent) {
  TempDir tmp;
  InitModelOptions options = TinyOptions(tmp, "g", "granitemoehybrid");
  testing::WriteFileOrFail(options.tokenizer_json,
                           testing::SmallTokenizerJson(300));
  ASSERT_OK(WriteRandomModel(options));
  std::unique_ptr<Model> model = testing::LoadOrDie(options.out_dir);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->description().architecture, "granitemoehybrid");
  EXPECT_EQ(model->description().num_layers, 3);
  auto state = model->NewState();
  EXPECT_EQ(state->layer(0).kind(), "mamba2");
  EXPECT_EQ(state->layer(1).kind(), "full_kv");
  EXPECT_EQ(state->layer(2).kind(), "mamba2");
  const std::vector<int32_t> tokens = testing::RandomTokens(150, 300, 9);
  ExpectPrefillEqualsSteps(*model, tokens);
}

// With experts: a prefill groups many rows per expert, a step routes one.
TEST(GraniteHybridInitTest, TinyMoePresetLoadsAndChunkedEqualsRecurrent) {
  TempDir tmp;
  InitModelOptions options = TinyOptions(tmp, "moe", "granitemoehybrid");
  options.preset = "tiny-moe";
  testing::WriteFileOrFail(options.tokenizer_json,
                           testing::SmallTokenizerJson(300));
  ASSERT_OK(WriteRandomModel(options));
  const std::string config =
      testing::ReadFileOrEmpty(tmp.Sub("moe/config.json"));
  EXPECT_THAT(config, HasSubstr("\"num_local_experts\": 4"));
  std::unique_ptr<Model> model = testing::LoadOrDie(options.out_dir);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->description().architecture, "granitemoehybrid");
  const std::vector<int32_t> tokens = testing::RandomTokens(150, 300, 9);
  ExpectPrefillEqualsSteps(*model, tokens);
}

TEST(NemotronHInitTest, UnknownPresetIsRefused) {
  TempDir tmp;
  InitModelOptions options = TinyOptions(tmp, "m");
  options.preset = "360m-shape";
  testing::WriteFileOrFail(options.tokenizer_json,
                           testing::SmallTokenizerJson(10));
  const absl::Status s = WriteRandomModel(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("nemotron-h-8b-width"));
}

}  // namespace
}  // namespace twice::engine
