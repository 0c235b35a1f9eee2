// JRT-RNN configs: recognised by "architecture" / "model_type" "jrt" or, as
// upstream ships them (GPT2Config dumps), by alt_mixer._target_ naming
// PrefixLinearAttention; enc_length at the top level or inside alt_mixer;
// the init-model presets (tiny, and the JRT-360M shape of 26 layers).
#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/config/based_config.h"
#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "engine/weights/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::HasSubstr;

// JRT-360M as the fact sheet describes it (GPT2Config dump, no
// "architecture" key), with enc_length inside alt_mixer.
constexpr char kJrt360m[] = R"({
  "model_type": "gpt2", "n_embd": 1024, "n_layer": 26, "n_head": 16,
  "n_inner": 2048, "vocab_size": 50257, "pad_vocab_size_multiple": 8,
  "n_positions": 0, "layer_norm_epsilon": 1e-05, "eos_token_id": 50256,
  "mixer": {"_target_": "based.models.mixers.convolution.BaseConv",
            "expand_proj": 4, "kernel_sizes": [3], "use_bias": true},
  "alt_mixer": {
    "_target_": "based.models.mixers.prefix_linear_attention.PrefixLinearAttention",
    "feature_dim": 16, "num_heads": 16, "num_key_value_heads": 16,
    "enc_length": 1024, "implementation": "fla_parallel"},
  "alt_mixer_2": {"window_size": 256, "num_heads": 16},
  "alt_mixer_layers": [1, 6, 11, 16, 21],
  "alt_mixer_2_layers": [2, 7, 12, 17, 22]
})";

std::string With(std::string json, const std::string& from,
                 const std::string& to) {
  json.replace(json.find(from), from.size(), to);
  return json;
}

TEST(JrtConfigTest, UpstreamConfigIsRecognisedByItsMixer) {
  auto c = ParseBasedConfig(kJrt360m);
  ASSERT_OK(c);
  EXPECT_EQ(c->architecture, "jrt");
  EXPECT_TRUE(c->is_jrt());
  EXPECT_EQ(c->prefix_length, 1024);
  EXPECT_EQ(c->prefix_pad_token_id, 220);
  EXPECT_EQ(c->num_layers, 26);
  EXPECT_EQ(c->mixer(0), BasedMixerKind::kBaseConv);
  EXPECT_EQ(c->mixer(1), BasedMixerKind::kPrefixLinearAttention);
  EXPECT_EQ(c->mixer(2), BasedMixerKind::kSlidingWindow);
  EXPECT_EQ(c->mixer(25), BasedMixerKind::kBaseConv);
  int conv = 0;
  for (int i = 0; i < c->num_layers; ++i) {
    conv += c->mixer(i) == BasedMixerKind::kBaseConv;
  }
  EXPECT_EQ(conv, 16);
}

TEST(JrtConfigTest, EncoderLengthKeys) {
  // Top level wins over alt_mixer; absent = 1024.
  auto top = ParseBasedConfig(With(kJrt360m, R"("n_layer": 26,)",
                                   R"("n_layer": 26, "enc_length": 512,)"));
  ASSERT_OK(top);
  EXPECT_EQ(top->prefix_length, 512);
  auto absent = ParseBasedConfig(With(kJrt360m, R"("enc_length": 1024,)", ""));
  ASSERT_OK(absent);
  EXPECT_EQ(absent->prefix_length, 1024);
  auto nested = ParseBasedConfig(
      With(kJrt360m, R"("enc_length": 1024,)", R"("enc_length": 64,)"));
  ASSERT_OK(nested);
  EXPECT_EQ(nested->prefix_length, 64);
  auto zero = ParseBasedConfig(
      With(kJrt360m, R"("enc_length": 1024,)", R"("enc_length": 0,)"));
  EXPECT_THAT(zero.status().message(), HasSubstr("enc_length"));
  auto pad =
      ParseBasedConfig(With(kJrt360m, R"("n_layer": 26,)",
                            R"("n_layer": 26, "prefix_pad_token_id": 50257,)"));
  EXPECT_THAT(pad.status().message(), HasSubstr("prefix_pad_token_id"));
}

TEST(JrtConfigTest, ExplicitArchitectureNames) {
  auto jrt = ParseBasedConfig(
      With(kJrt360m, R"("model_type": "gpt2")", R"("architecture": "jrt")"));
  ASSERT_OK(jrt);
  EXPECT_EQ(jrt->architecture, "jrt");
  // A Based config never has a prefix encoder, whatever enc_length says.
  auto based = ParseBasedConfig(
      With(With(kJrt360m, "prefix_linear_attention.PrefixLinearAttention",
                "linear_attention.LinearAttention"),
           R"("model_type": "gpt2")", R"("architecture": "based")"));
  ASSERT_OK(based);
  EXPECT_EQ(based->prefix_length, 0);
  EXPECT_EQ(based->mixer(1), BasedMixerKind::kLinearAttention);
  // Saying "based" while naming the JRT mixer is a contradiction.
  auto contradiction = ParseBasedConfig(
      With(kJrt360m, R"("model_type": "gpt2")", R"("architecture": "based")"));
  EXPECT_EQ(contradiction.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(contradiction.status().message(),
              HasSubstr("PrefixLinearAttention"));
}

TEST(JrtConfigTest, TinyPreset) {
  testing::TempDir tmp;
  testing::WriteFileOrFail(tmp.Sub("tok.json"),
                           testing::SmallTokenizerJson(300));
  InitModelOptions options;
  options.architecture = "jrt";
  options.out_dir = tmp.Sub("m");
  options.tokenizer_json = tmp.Sub("tok.json");
  ASSERT_OK(WriteRandomModel(options));
  auto c = ParseBasedConfig(testing::ReadFileOrEmpty(tmp.Sub("m/config.json")));
  ASSERT_OK(c);
  EXPECT_EQ(c->architecture, "jrt");
  EXPECT_EQ(c->prefix_length, 64);
  EXPECT_EQ(c->num_layers, 4);
  EXPECT_EQ(c->mixer(1), BasedMixerKind::kPrefixLinearAttention);
  auto w = testing::ReadAllWeights(tmp.Sub("m/model.safetensors"));
  ASSERT_OK(w);
  EXPECT_EQ(w->at("transformer.layers.1.mixer.proj_k_enc.weight").shape(),
            (Shape{64, 64}));
  EXPECT_EQ(w->at("transformer.layers.1.mixer.proj_v_enc.weight").shape(),
            (Shape{64, 64}));
}

// About 1.43 GB on disk: only when asked for.
TEST(JrtConfigTest, Preset360mShapeHasThePublishedParameterCount) {
  InitModelOptions options;
  if (std::getenv("TWICE_RUN_LARGE_TESTS") == nullptr ||
      !std::filesystem::exists(options.tokenizer_json)) {
    GTEST_SKIP() << "set TWICE_RUN_LARGE_TESTS=1 (needs the GPT-2 tokenizer)";
  }
  testing::TempDir tmp;
  options.architecture = "jrt";
  options.preset = "360m-shape";
  options.out_dir = tmp.Sub("jrt360m");
  ASSERT_OK(WriteRandomModel(options));
  auto file = SafetensorsFile::Open(options.out_dir + "/model.safetensors");
  ASSERT_OK(file);
  int64_t params = 0;
  for (const SafetensorsEntry& e : (*file)->entries()) {
    int64_t n = 1;
    for (int64_t dim : e.shape) n *= dim;
    params += n;
  }
  EXPECT_EQ(params, 356578304);  // JRT paper Table 8 "356m", fact sheet 1.1
  auto model = LoadModel(options.out_dir);
  ASSERT_OK(model);
  EXPECT_EQ((*model)->description().num_layers, 26);
  EXPECT_EQ((*model)->description().prefix_length, 1024);
  auto state = (*model)->NewState();
  // 5 x 283,920 + 5 x 262,144 + 16 x 4,096 floats (+ tensor headers).
  EXPECT_NEAR(static_cast<double>(state->ByteSize()),
              4.0 * (5 * 283920 + 5 * 262144 + 16 * 4096), 4096.0);
  auto logits = (*model)->Prefill(testing::RandomTokens(100, 50257, 1), *state,
                                  PrefillMode::kPrefix);
  ASSERT_OK(logits);
  EXPECT_EQ(state->token_count(), 1024);
}

}  // namespace
}  // namespace twice::engine
