#include "engine/models/init_hybrid.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/config/granite_hybrid_config.h"
#include "engine/config/nemotron_h_config.h"
#include "engine/models/random_model_dir.h"
#include "kernels/status_macros.h"
#include "nlohmann/json.hpp"

namespace twice::engine {
namespace {

using Json = nlohmann::json;

[[nodiscard]] absl::StatusOr<Json> PresetConfig(const std::string& preset,
                                                const InitTokenizer& tok) {
  Json c;
  c["architectures"] = {"NemotronHForCausalLM"};
  c["model_type"] = "nemotron_h";
  c["vocab_size"] = tok.vocab;
  c["layer_norm_epsilon"] = 1e-5;
  c["tie_word_embeddings"] = false;
  c["mlp_hidden_act"] = "relu2";
  c["mamba_hidden_act"] = "silu";
  c["use_bias"] = false;
  c["use_conv_bias"] = true;
  c["conv_kernel"] = 4;
  c["max_position_embeddings"] = 8192;
  if (tok.eos >= 0) c["eos_token_id"] = tok.eos;
  if (preset == "tiny" || preset == "tiny-moe") {
    if (preset == "tiny-moe") {
      c["num_local_experts"] = 4;
      c["num_experts_per_tok"] = 2;
      c["intermediate_size"] = 64;
    }
    c["hidden_size"] = 64;
    c["hybrid_override_pattern"] = "M*M-";
    c["mamba_num_heads"] = 8;
    c["mamba_head_dim"] = 16;
    c["n_groups"] = 2;
    c["ssm_state_size"] = 16;
    c["chunk_size"] = 64;
    c["num_attention_heads"] = 4;
    c["num_key_value_heads"] = 2;
    c["head_dim"] = 16;
    c["intermediate_size"] = 256;
  } else if (preset == "nemotron-h-8b-width") {
    c["hidden_size"] = 4096;
    c["hybrid_override_pattern"] = "M-M*";
    c["mamba_num_heads"] = 128;
    c["mamba_head_dim"] = 64;
    c["n_groups"] = 8;
    c["ssm_state_size"] = 128;
    c["chunk_size"] = 128;
    c["num_attention_heads"] = 32;
    c["num_key_value_heads"] = 8;
    c["head_dim"] = 128;
    c["intermediate_size"] = 21504;
  } else {
    return UnknownPreset("nemotron_h", preset,
                         "\"tiny\" or \"nemotron-h-8b-width\"");
  }
  c["num_hidden_layers"] =
      c["hybrid_override_pattern"].get<std::string>().size();
  return c;
}

struct MambaShape {
  int64_t dim, heads, inner, groups, d_state, d_conv;
};

void MambaWeights(const MambaShape& c, const std::string& m, double std,
                  double out_std, RandomWeights& w) {
  const int64_t d = c.dim, h = c.heads, e = c.inner;
  const int64_t conv_dim = e + 2 * c.groups * c.d_state;
  w.Normal(m + "in_proj.weight", {e + conv_dim + h, d}, std);
  w.Normal(m + "conv1d.weight", {conv_dim, 1, c.d_conv}, 0.1);
  w.Normal(m + "conv1d.bias", {conv_dim}, std);
  w.Normal(m + "out_proj.weight", {d, e}, out_std);
  w.Ones(m + "norm.weight", e);
  w.Ones(m + "D", h);
  w.LogUniform(m + "A_log", {h}, 1.0, 16.0);
  // dt_bias = softplus⁻¹(dt) = dt + log(1 - e^-dt) for dt drawn uniform in
  // [1e-3, 0.1] (drawn as log(U), so deterministic in the name).
  w.LogUniform(m + "dt_bias", {h}, 1e-3, 0.1);
  for (float& v : w.at(m + "dt_bias").mutable_span()) {
    const double dt = std::exp(double{v});
    v = static_cast<float>(dt + std::log(-std::expm1(-dt)));
  }
}

[[nodiscard]] absl::StatusOr<Json> GranitePresetConfig(
    const std::string& preset, const InitTokenizer& tok) {
  Json c;
  c["architectures"] = {"GraniteMoeHybridForCausalLM"};
  c["model_type"] = "granitemoehybrid";
  c["vocab_size"] = tok.vocab;
  c["rms_norm_eps"] = 1e-5;
  c["tie_word_embeddings"] = true;
  c["hidden_act"] = "silu";
  c["position_embedding_type"] = "nope";
  c["num_local_experts"] = 0;
  c["mamba_d_conv"] = 4;
  c["mamba_expand"] = 2;
  c["max_position_embeddings"] = 8192;
  if (tok.eos >= 0) c["eos_token_id"] = tok.eos;
  if (preset == "tiny" || preset == "tiny-moe") {
    if (preset == "tiny-moe") {
      c["num_local_experts"] = 4;
      c["num_experts_per_tok"] = 2;
      c["intermediate_size"] = 64;
    }
    c["hidden_size"] = 64;
    c["layer_types"] = {"mamba", "attention", "mamba"};
    c["mamba_n_heads"] = 8;
    c["mamba_d_head"] = 16;
    c["mamba_n_groups"] = 2;
    c["mamba_d_state"] = 16;
    c["mamba_chunk_size"] = 64;
    c["num_attention_heads"] = 4;
    c["num_key_value_heads"] = 2;
    c["shared_intermediate_size"] = 128;
    c["embedding_multiplier"] = 2.0;
    c["residual_multiplier"] = 0.5;
    c["attention_multiplier"] = 0.25;
    c["logits_scaling"] = 2.0;
  } else if (preset == "granite-4.0-h-tiny-width" ||
             preset == "granite-4.0-h-tiny-moe-width") {
    const bool moe = preset == "granite-4.0-h-tiny-moe-width";
    c["hidden_size"] = 1536;
    Json types = Json::array();
    for (int i = 0; i < (moe ? 6 : 10); ++i)
      types.push_back(i == 5 ? "attention" : "mamba");
    if (moe) {
      c["num_local_experts"] = 64;
      c["num_experts_per_tok"] = 6;
      c["intermediate_size"] = 512;
    }
    c["layer_types"] = types;
    c["mamba_n_heads"] = 48;
    c["mamba_d_head"] = 64;
    c["mamba_n_groups"] = 1;
    c["mamba_d_state"] = 128;
    c["mamba_chunk_size"] = 256;
    c["num_attention_heads"] = 12;
    c["num_key_value_heads"] = 4;
    c["shared_intermediate_size"] = 1024;
  } else {
    return UnknownPreset("granitemoehybrid", preset,
                         "\"tiny\", \"tiny-moe\", \"granite-4.0-h-tiny-width\" "
                         "or \"granite-4.0-h-tiny-moe-width\"");
  }
  c["num_hidden_layers"] = c["layer_types"].size();
  return c;
}

}  // namespace

absl::Status WriteRandomGraniteHybridModel(const InitModelOptions& options) {
  if (options.out_dir.empty()) {
    return absl::InvalidArgumentError("init-model: out_dir is empty");
  }
  TWICE_ASSIGN_OR_RETURN(InitTokenizer tok,
                         ReadInitTokenizer(options.tokenizer_json));
  TWICE_ASSIGN_OR_RETURN(Json json, GranitePresetConfig(options.preset, tok));
  const std::string text = json.dump(2) + "\n";
  TWICE_ASSIGN_OR_RETURN(GraniteHybridConfig c, ParseGraniteHybridConfig(text));
  RandomWeights w(options.seed);
  const int64_t d = c.hidden_size;
  const double std = 0.02, out_std = std / std::sqrt(2.0 * c.num_layers());
  w.Normal("model.embed_tokens.weight", {c.vocab_size, d}, std);
  w.Ones("model.norm.weight", d);
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  for (int i = 0; i < c.num_layers(); ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    w.Ones(p + "input_layernorm.weight", d);
    w.Ones(p + "post_attention_layernorm.weight", d);
    if (c.is_attention[i]) {
      w.Normal(p + "self_attn.q_proj.weight", {q, d}, std);
      w.Normal(p + "self_attn.k_proj.weight", {kv, d}, std);
      w.Normal(p + "self_attn.v_proj.weight", {kv, d}, std);
      w.Normal(p + "self_attn.o_proj.weight", {d, q}, out_std);
    } else {
      MambaWeights(
          {d, c.mamba_heads, c.mamba_inner(), c.n_groups, c.d_state, c.d_conv},
          p + "mamba.", std, out_std, w);
    }
    w.Normal(p + "shared_mlp.input_linear.weight", {2 * c.intermediate_size, d},
             std);
    w.Normal(p + "shared_mlp.output_linear.weight", {d, c.intermediate_size},
             out_std);
    if (c.experts > 0) {
      const std::string e = p + "block_sparse_moe.";
      const int64_t n = c.experts, i_e = c.expert_intermediate_size;
      w.Normal(e + "router.layer.weight", {n, d}, std);
      w.Normal(e + "input_linear.weight", {n, 2 * i_e, d}, std);
      w.Normal(e + "output_linear.weight", {n, d, i_e}, out_std);
    }
  }
  return WriteModelDir(options, text, tok.json, w.tensors());
}

absl::Status WriteRandomNemotronHModel(const InitModelOptions& options) {
  if (options.out_dir.empty()) {
    return absl::InvalidArgumentError("init-model: out_dir is empty");
  }
  TWICE_ASSIGN_OR_RETURN(InitTokenizer tok,
                         ReadInitTokenizer(options.tokenizer_json));
  TWICE_ASSIGN_OR_RETURN(Json json, PresetConfig(options.preset, tok));
  const std::string text = json.dump(2) + "\n";
  // Every shape from the parsed config, as LoadModel will read it.
  TWICE_ASSIGN_OR_RETURN(NemotronHConfig c, ParseNemotronHConfig(text));
  RandomWeights w(options.seed);
  const int64_t d = c.hidden_size;
  const double std = 0.02, out_std = std / std::sqrt(2.0 * c.num_layers());
  w.Normal("backbone.embeddings.weight", {c.vocab_size, d}, std);
  w.Normal("lm_head.weight", {c.vocab_size, d}, std);
  w.Ones("backbone.norm_f.weight", d);
  for (int i = 0; i < c.num_layers(); ++i) {
    const std::string p = absl::StrCat("backbone.layers.", i, ".");
    const std::string m = p + "mixer.";
    w.Ones(p + "norm.weight", d);
    switch (c.kind(i)) {
      case NemotronHLayerKind::kMamba:
        MambaWeights({d, c.mamba_heads, c.mamba_inner(), c.n_groups,
                      c.ssm_state_size, c.conv_kernel},
                     m, std, out_std, w);
        break;
      case NemotronHLayerKind::kAttention: {
        const int64_t q = c.num_heads * c.head_dim;
        const int64_t kv = c.num_kv_heads * c.head_dim;
        w.Normal(m + "q_proj.weight", {q, d}, std);
        w.Normal(m + "k_proj.weight", {kv, d}, std);
        w.Normal(m + "v_proj.weight", {kv, d}, std);
        w.Normal(m + "o_proj.weight", {d, q}, out_std);
        break;
      }
      case NemotronHLayerKind::kMlp:
        w.Normal(m + "up_proj.weight", {c.intermediate_size, d}, std);
        w.Normal(m + "down_proj.weight", {d, c.intermediate_size}, out_std);
        break;
    }
  }
  return WriteModelDir(options, text, tok.json, w.tensors());
}

}  // namespace twice::engine
