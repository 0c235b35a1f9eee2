#include "engine/models/init_nemotron_h.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
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
  if (preset == "tiny") {
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

void MambaWeights(const NemotronHConfig& c, const std::string& m, double std,
                  double out_std, RandomWeights& w) {
  const int64_t d = c.hidden_size, h = c.mamba_heads, e = c.mamba_inner();
  const int64_t conv_dim = e + 2 * c.n_groups * c.ssm_state_size;
  w.Normal(m + "in_proj.weight", {e + conv_dim + h, d}, std);
  w.Normal(m + "conv1d.weight", {conv_dim, 1, c.conv_kernel}, 0.1);
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

}  // namespace

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
        MambaWeights(c, m, std, out_std, w);
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
