// NemotronHConfig parsing: the Nemotron-H-8B keys as published (Python's
// Infinity included), legacy aliases and defaults, and INVALID_ARGUMENT
// naming the key for every layout the engine does not implement; plus a
// Nemotron-H model directory with a mis-shaped tensor refused at load,
// naming the tensor.
#include "engine/config/nemotron_h_config.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/config/json_fields.h"
#include "engine/models/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::HasSubstr;

// Nemotron-H-8B-Base-8K's values from the fact sheet (§2.1), as
// transformers writes them.
constexpr char k8b[] = R"({
  "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
  "hidden_size": 4096, "num_hidden_layers": 52,
  "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
  "mamba_num_heads": 128, "mamba_head_dim": 64, "n_groups": 8,
  "ssm_state_size": 128, "conv_kernel": 4, "chunk_size": 128,
  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
  "intermediate_size": 21504, "mlp_hidden_act": "relu2",
  "mamba_hidden_act": "silu", "layer_norm_epsilon": 1e-05,
  "vocab_size": 131072, "tie_word_embeddings": false, "use_bias": false,
  "mlp_bias": false, "attention_bias": false, "use_conv_bias": true,
  "time_step_limit": [0.0, Infinity], "time_step_min": 0.001,
  "residual_in_fp32": false, "max_position_embeddings": 8192,
  "eos_token_id": 2
})";

std::string With(std::string_view key_and_value) {
  std::string json = k8b;
  json.insert(json.rfind('}'), ", " + std::string(key_and_value));
  return json;
}

TEST(NemotronHConfigTest, Parses8b) {
  auto c = ParseNemotronHConfig(k8b);
  ASSERT_OK(c);
  EXPECT_EQ(c->architecture, "nemotron_h");
  EXPECT_EQ(c->num_layers(), 52);
  EXPECT_EQ(c->hidden_size, 4096);
  EXPECT_EQ(c->mamba_inner(), 8192);  // heads · head_dim, not expand · d
  EXPECT_EQ(c->n_groups, 8);
  EXPECT_EQ(c->num_heads, 32);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->intermediate_size, 21504);
  EXPECT_EQ(c->vocab_size, 131072);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->training_context, 8192);
  int mamba = 0, attention = 0, mlp = 0;
  for (int l = 0; l < c->num_layers(); ++l) {
    switch (c->kind(l)) {
      case NemotronHLayerKind::kMamba:
        ++mamba;
        break;
      case NemotronHLayerKind::kAttention:
        ++attention;
        break;
      case NemotronHLayerKind::kMlp:
        ++mlp;
        break;
    }
  }
  EXPECT_EQ(mamba, 24);
  EXPECT_EQ(attention, 4);
  EXPECT_EQ(mlp, 24);
  EXPECT_EQ(c->kind(7), NemotronHLayerKind::kAttention);
  EXPECT_EQ(config::ConfigArchitecture(k8b), "nemotron_h");
}

TEST(NemotronHConfigTest, LegacyAliasesAndDefaults) {
  auto c = ParseNemotronHConfig(R"({"model_type": "nemotron_h",
      "hidden_size": 64, "hybrid_override_pattern": "M*", "mamba_num_heads": 4,
      "mamba_head_dim": 16, "mamba_n_groups": 2, "mamba_d_conv": 3,
      "mamba_chunk_size": 64, "num_attention_heads": 4, "vocab_size": 100})");
  ASSERT_OK(c);
  EXPECT_EQ(c->n_groups, 2);
  EXPECT_EQ(c->conv_kernel, 3);
  EXPECT_EQ(c->chunk_size, 64);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 16);  // hidden / heads
  EXPECT_EQ(c->ssm_state_size, 128);
  EXPECT_FLOAT_EQ(c->norm_eps, 1e-5f);
  EXPECT_EQ(c->intermediate_size, 0);  // no MLP layer, not needed
}

TEST(NemotronHConfigTest, UnsupportedLayoutsNameTheKey) {
  struct Case {
    std::string json;
    std::string key;
  };
  std::string moe = k8b;
  moe.replace(moe.find("M*-M"), 4, "ME-M");
  std::string odd = k8b;
  odd.replace(odd.find("M*-M"), 4, "M+-M");
  const Case cases[] = {
      {moe, "hybrid_override_pattern"},
      {odd, "hybrid_override_pattern"},
      {With(R"("num_hidden_layers": 50)"), "num_hidden_layers"},
      {With(R"("mlp_hidden_act": "silu")"), "mlp_hidden_act"},
      {With(R"("mamba_hidden_act": "gelu")"), "mamba_hidden_act"},
      {With(R"("attention_bias": true)"), "attention_bias"},
      {With(R"("use_conv_bias": false)"), "use_conv_bias"},
      {With(R"("time_step_limit": [0.0, 0.1])"), "time_step_limit"},
      {With(R"("n_groups": 3)"), "n_groups"},
      {With(R"("num_key_value_heads": 5)"), "num_key_value_heads"},
      {With(R"("vocab_size": -1)"), "vocab_size"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    auto parsed = ParseNemotronHConfig(c.json);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr("\"" + c.key + "\""));
  }
  auto no_pattern = ParseNemotronHConfig(
      R"({"model_type": "nemotron_h", "hidden_size": 8, "vocab_size": 9})");
  ASSERT_FALSE(no_pattern.ok());
  EXPECT_THAT(no_pattern.status().message(),
              HasSubstr("hybrid_override_pattern"));
}

// Python's literals are read as strings only outside strings, and only a
// parser that expects them (time_step_limit) accepts them.
TEST(NemotronHConfigTest, PythonLiteralsAreReadOnlyWhereExpected) {
  auto nan_eps = ParseNemotronHConfig(With(R"("layer_norm_epsilon": NaN)"));
  ASSERT_FALSE(nan_eps.ok());
  EXPECT_THAT(nan_eps.status().message(), HasSubstr("layer_norm_epsilon"));
  auto root =
      config::ParseObject(R"({"a": "Infinity \" NaN", "b": -Infinity})");
  ASSERT_OK(root);
  EXPECT_EQ((*root)["a"], "Infinity \" NaN");
  EXPECT_EQ((*root)["b"], "-Infinity");
  EXPECT_FALSE(config::IsPositiveInfinity((*root)["b"]));
}

// The golden model with its MLP widened in config.json: its up_proj no
// longer fits, and the load error names the tensor.
TEST(NemotronHConfigTest, MisShapedTensorIsNamedAtLoad) {
  const std::filesystem::path src = "tests/data/golden/nemotron_h";
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "nemotron_h_misshaped";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* f : {"model.safetensors", "tokenizer.json"}) {
    std::filesystem::copy_file(src / f, dir / f);
  }
  std::ifstream in(src / "config.json");
  std::string config((std::istreambuf_iterator<char>(in)), {});
  const size_t at = config.find("\"intermediate_size\": 32");
  ASSERT_NE(at, std::string::npos);
  config.replace(at, 23, "\"intermediate_size\": 48");
  std::ofstream(dir / "config.json") << config;
  auto model = LoadModel(dir.string());
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(),
              HasSubstr("backbone.layers.3.mixer.up_proj.weight"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace twice::engine
