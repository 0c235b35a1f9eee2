// BasedConfig parsing: the based-360m keys, GPT-2 aliases, defaults,
// derived sizes, and INVALID_ARGUMENT naming the offending key.
#include <string>

#include "engine/config/based_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::HasSubstr;

// The based-360m config as the fact sheet describes it (GPT2Config dump).
constexpr char k360m[] = R"({
  "model_type": "gpt2", "n_embd": 1024, "n_layer": 27, "n_head": 16,
  "n_inner": 2048, "vocab_size": 50257, "pad_vocab_size_multiple": 8,
  "n_positions": 0, "layer_norm_epsilon": 1e-05, "eos_token_id": 50256,
  "bos_token_id": 50256, "tie_word_embeddings": true,
  "mixer": {"_target_": "based.models.mixers.convolution.BaseConv",
            "expand_proj": 4, "kernel_sizes": 3, "use_bias": true},
  "alt_mixer": {"_target_": "based.models.mixers.linear_attention.LinearAttention",
                "feature_dim": 16, "num_heads": 16,
                "feature_map": {"input_dim": 16}},
  "alt_mixer_2": {"window_size": 256, "num_heads": 16},
  "alt_mixer_layers": [1, 6, 11, 16, 21],
  "alt_mixer_2_layers": [2, 7, 12, 17, 22]
})";

TEST(BasedConfigTest, Parses360m) {
  auto c = ParseBasedConfig(k360m);
  ASSERT_OK(c);
  EXPECT_EQ(c->architecture, "based");
  EXPECT_EQ(c->hidden_size, 1024);
  EXPECT_EQ(c->num_layers, 27);
  EXPECT_EQ(c->num_heads, 16);
  EXPECT_EQ(c->padded_vocab_size(), 50264);
  EXPECT_EQ(c->mlp_hidden(), 2048);
  EXPECT_EQ(c->conv_inner(), 2048);
  EXPECT_EQ(c->window_left(), 128);
  EXPECT_EQ(c->feature_dim, 16);
  EXPECT_EQ(c->linear_attention_heads, 16);
  EXPECT_FLOAT_EQ(c->linear_attention_eps, 1e-12f);
  EXPECT_FLOAT_EQ(c->norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->rotary_base, 10000.0f);
  EXPECT_EQ(c->eos_token_id, 50256);
  EXPECT_EQ(c->training_context, 2048);  // n_positions 0 -> default
  EXPECT_EQ(c->mixer(0), BasedMixerKind::kBaseConv);
  EXPECT_EQ(c->mixer(1), BasedMixerKind::kLinearAttention);
  EXPECT_EQ(c->mixer(2), BasedMixerKind::kSlidingWindow);
  EXPECT_EQ(c->mixer(26), BasedMixerKind::kBaseConv);
  // Canonical JSON: sorted keys, no whitespace.
  EXPECT_EQ(c->canonical_json.find(' '), std::string::npos);
  EXPECT_LT(c->canonical_json.find("\"alt_mixer\""),
            c->canonical_json.find("\"n_embd\""));
}

TEST(BasedConfigTest, AliasesAndDefaults) {
  auto c = ParseBasedConfig(R"({"architecture": "based", "hidden_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 10,
      "max_position_embeddings": 512, "alt_mixer_2": {"window_size": 9},
      "alt_mixer_2_layers": [0, 1], "alt_mixer_layers": [1]})");
  ASSERT_OK(c);
  EXPECT_EQ(c->hidden_size, 96);
  EXPECT_EQ(c->n_inner, 4 * 96);
  EXPECT_EQ(c->mlp_hidden(), 512);  // 384 rounded up to 256s
  EXPECT_EQ(c->padded_vocab_size(), 16);
  EXPECT_EQ(c->training_context, 512);
  EXPECT_EQ(c->window_left(), 4);  // 9 / 2
  EXPECT_EQ(c->eos_token_id, -1);
  EXPECT_EQ(c->linear_attention_heads, 4);
  EXPECT_EQ(c->mixer(1),
            BasedMixerKind::kSlidingWindow);  // wins over alt_mixer
  auto t = ParseBasedConfig(R"({"n_embd": 8, "n_layer": 1, "n_head": 2,
      "vocab_size": 5, "training_context": 77, "max_position_embeddings": 9})");
  ASSERT_OK(t);
  EXPECT_EQ(t->training_context, 77);
}

TEST(BasedConfigTest, RejectsInvalidConfigsNamingTheKey) {
  struct Case {
    const char* json;
    const char* key;
  };
  const Case cases[] = {
      {"{", "not valid JSON"},
      {"[]", "not a JSON object"},
      {R"({"n_layer": 1, "n_head": 1, "vocab_size": 5})", "n_embd"},
      {R"({"n_embd": 8, "n_head": 1, "vocab_size": 5})", "n_layer"},
      {R"({"n_embd": 8, "n_layer": 1, "n_head": 1})", "vocab_size"},
      {R"({"n_embd": "8", "n_layer": 1, "n_head": 1, "vocab_size": 5})",
       "n_embd"},
      {R"({"n_embd": -8, "n_layer": 1, "n_head": 1, "vocab_size": 5})",
       "n_embd"},
      {R"({"n_embd": 8, "n_layer": 2, "n_head": 1, "vocab_size": 5,
           "alt_mixer_layers": [2]})",
       "alt_mixer_layers"},
      {R"({"n_embd": 8, "n_layer": 2, "n_head": 1, "vocab_size": 5,
           "alt_mixer_layers": [1, 1]})",
       "alt_mixer_layers"},
      {R"({"n_embd": 8, "n_layer": 2, "n_head": 3, "vocab_size": 5,
           "alt_mixer_layers": [1]})",
       "alt_mixer.num_heads"},
      {R"({"n_embd": 8, "n_layer": 2, "n_head": 2, "vocab_size": 5,
           "alt_mixer_2_layers": [1]})",
       "window_size"},
      {R"({"n_embd": 8, "n_layer": 2, "n_head": 8, "vocab_size": 5,
           "alt_mixer_2_layers": [1], "alt_mixer_2": {"window_size": 4}})",
       "n_head"},
      {R"({"n_embd": 8, "n_layer": 1, "n_head": 1, "vocab_size": 5,
           "layer_norm_epsilon": -1})",
       "layer_norm_epsilon"},
      {R"({"n_embd": 8, "n_layer": 1, "n_head": 1, "vocab_size": 5,
           "alt_mixer": []})",
       "alt_mixer"},
      {R"({"architecture": "mamba2", "n_embd": 8})", "mamba2"},
      {R"({"model_type": "gpt2", "n_embd": 8})", "gpt2"},
  };
  for (const Case& c : cases) {
    auto r = ParseBasedConfig(c.json);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(r.status().message(), HasSubstr(c.key)) << c.json;
  }
}

}  // namespace
}  // namespace twice::engine
