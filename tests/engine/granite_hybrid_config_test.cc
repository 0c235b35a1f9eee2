// GraniteHybridConfig parsing: a dense Granite-4.0-H config as transformers
// writes it (h-tiny's widths, no experts) and the same with h-tiny's
// experts, the derived head size and defaults, and INVALID_ARGUMENT naming
// the key for an incomplete expert layout and every other layout the engine
// does not implement.
#include "engine/config/granite_hybrid_config.h"

#include <cmath>
#include <string>

#include "engine/config/json_fields.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::HasSubstr;

// h-tiny's keys (fact sheet §3.1) with the experts removed.
constexpr char kDense[] = R"({
  "architectures": ["GraniteMoeHybridForCausalLM"],
  "model_type": "granitemoehybrid", "hidden_size": 1536,
  "num_hidden_layers": 6,
  "layer_types": ["mamba", "mamba", "mamba", "mamba", "mamba", "attention"],
  "num_attention_heads": 12, "num_key_value_heads": 4,
  "mamba_n_heads": 48, "mamba_d_head": 64, "mamba_n_groups": 1,
  "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2,
  "mamba_chunk_size": 256, "num_local_experts": 0,
  "shared_intermediate_size": 1024, "position_embedding_type": "nope",
  "vocab_size": 100352, "tie_word_embeddings": true, "hidden_act": "silu",
  "rms_norm_eps": 1e-05, "embedding_multiplier": 12.0,
  "residual_multiplier": 0.22, "attention_multiplier": 0.015625,
  "logits_scaling": 6.0, "max_position_embeddings": 131072,
  "time_step_limit": [0.0, Infinity], "eos_token_id": 100257
})";

std::string With(std::string_view key_and_value) {
  std::string json = kDense;
  json.insert(json.rfind('}'), ", " + std::string(key_and_value));
  return json;
}

TEST(GraniteHybridConfigTest, ParsesADenseConfig) {
  auto c = ParseGraniteHybridConfig(kDense);
  ASSERT_OK(c);
  EXPECT_EQ(c->architecture, "granitemoehybrid");
  EXPECT_EQ(c->num_layers(), 6);
  EXPECT_FALSE(c->is_attention[0]);
  EXPECT_TRUE(c->is_attention[5]);
  EXPECT_EQ(c->mamba_inner(), 3072);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->intermediate_size, 1024);
  EXPECT_FLOAT_EQ(c->embedding_multiplier, 12.0f);
  EXPECT_FLOAT_EQ(c->residual_multiplier, 0.22f);
  EXPECT_FLOAT_EQ(c->attention_multiplier, 0.015625f);
  EXPECT_FLOAT_EQ(c->logits_scaling, 6.0f);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->training_context, 131072);
  EXPECT_EQ(config::ConfigArchitecture(kDense), "granitemoehybrid");
}

TEST(GraniteHybridConfigTest, ParsesTheExpertsOfAnMoeConfig) {
  auto dense = ParseGraniteHybridConfig(kDense);
  ASSERT_OK(dense);
  EXPECT_EQ(dense->experts, 0);
  // h-tiny: 64 experts of width 512, 6 per token (fact sheet §3.1).
  auto c = ParseGraniteHybridConfig(
      With(R"("num_local_experts": 64, "num_experts_per_tok": 6, )"
           R"("intermediate_size": 512)"));
  ASSERT_OK(c);
  EXPECT_EQ(c->experts, 64);
  EXPECT_EQ(c->experts_per_token, 6);
  EXPECT_EQ(c->expert_intermediate_size, 512);
  EXPECT_EQ(c->intermediate_size, 1024);  // the shared MLP keeps its own
}

TEST(GraniteHybridConfigTest, AttentionScaleDefaultsToOneOverRootHeadDim) {
  std::string json = kDense;
  json.erase(json.find("\"attention_multiplier\""), 33);  // with its comma
  auto c = ParseGraniteHybridConfig(json);
  ASSERT_OK(c);
  EXPECT_FLOAT_EQ(c->attention_multiplier, 1.0f / std::sqrt(128.0f));
}

TEST(GraniteHybridConfigTest, UnsupportedLayoutsNameTheKey) {
  struct Case {
    std::string json;
    std::string key;
  };
  const Case cases[] = {
      {With(R"("num_local_experts": -1)"), "num_local_experts"},
      {With(R"("num_local_experts": 64, "intermediate_size": 512)"),
       "num_experts_per_tok"},
      {With(R"("num_local_experts": 64, "num_experts_per_tok": 65, )"
            R"("intermediate_size": 512)"),
       "num_experts_per_tok"},
      {With(R"("num_local_experts": 64, "num_experts_per_tok": 6)"),
       "intermediate_size"},
      {With(R"("position_embedding_type": "rope")"), "position_embedding_type"},
      {With(R"("layer_types": ["mamba", "moe"])"), "layer_types"},
      {With(R"("num_hidden_layers": 40)"), "num_hidden_layers"},
      {With(R"("mamba_d_head": 32)"), "mamba_d_head"},
      {With(R"("hidden_act": "gelu")"), "hidden_act"},
      {With(R"("attention_bias": true)"), "attention_bias"},
      {With(R"("mamba_proj_bias": true)"), "mamba_proj_bias"},
      {With(R"("time_step_limit": [0.0, 1.0])"), "time_step_limit"},
      {With(R"("num_key_value_heads": 5)"), "num_key_value_heads"},
      {With(R"("logits_scaling": 0)"), "logits_scaling"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    auto parsed = ParseGraniteHybridConfig(c.json);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr("\"" + c.key + "\""));
  }
}

}  // namespace
}  // namespace twice::engine
