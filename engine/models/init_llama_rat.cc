#include "engine/models/init_llama_rat.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/config/llama_config.h"
#include "engine/config/rat_config.h"
#include "engine/models/random_model_dir.h"
#include "engine/tensor/tensor.h"
#include "kernels/status_macros.h"
#include "nlohmann/json.hpp"

namespace twice::engine {
namespace {

using Json = nlohmann::json;

}  // namespace

absl::Status WriteRandomLlamaModel(const InitModelOptions& options) {
  if (options.out_dir.empty()) {
    return absl::InvalidArgumentError("init-model: out_dir is empty");
  }
  TWICE_ASSIGN_OR_RETURN(InitTokenizer tok,
                         ReadInitTokenizer(options.tokenizer_json));
  Json c;
  c["architectures"] = {"LlamaForCausalLM"};
  c["model_type"] = "llama";
  c["vocab_size"] = tok.vocab;
  c["rms_norm_eps"] = 1e-5;
  c["tie_word_embeddings"] = true;
  c["max_position_embeddings"] = 2048;
  c["rope_scaling"] = nullptr;
  if (tok.eos >= 0) c["eos_token_id"] = tok.eos;
  if (options.preset == "tiny") {
    c["hidden_size"] = 64;
    c["num_hidden_layers"] = 2;
    c["num_attention_heads"] = 4;
    c["num_key_value_heads"] = 2;
    c["intermediate_size"] = 128;
    c["rope_theta"] = 10000.0;
  } else if (options.preset == "llama-360m-shape") {
    c["hidden_size"] = 960;
    c["num_hidden_layers"] = 32;
    c["num_attention_heads"] = 15;
    c["num_key_value_heads"] = 5;
    c["intermediate_size"] = 2560;
    c["rope_theta"] = 100000.0;
  } else if (options.preset == "llama-2048-width") {
    // The width, depth and heads of rat-xl-shape with full multi-head KV,
    // SwiGLU sized to the same FFN parameters (3·I ≈ 2·8192): the
    // Transformer that RAT's decode is compared with, layer for layer.
    c["hidden_size"] = 2048;
    c["num_hidden_layers"] = 6;
    c["num_attention_heads"] = 16;
    c["num_key_value_heads"] = 16;
    c["intermediate_size"] = 5504;
    c["rope_theta"] = 10000.0;
    c["max_position_embeddings"] = 4096;
  } else {
    return UnknownPreset(
        "llama", options.preset,
        "\"tiny\", \"llama-360m-shape\" or \"llama-2048-width\"");
  }
  const std::string text = c.dump(2) + "\n";
  TWICE_ASSIGN_OR_RETURN(LlamaConfig cfg, ParseLlamaConfig(text));
  RandomWeights w(options.seed);
  const int64_t d = cfg.hidden_size;
  const double std = 0.02, out_std = std / std::sqrt(2.0 * cfg.num_layers);
  w.Normal("model.embed_tokens.weight", {cfg.vocab_size, d}, std);
  w.Ones("model.norm.weight", d);
  for (int i = 0; i < cfg.num_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    w.Ones(p + "input_layernorm.weight", d);
    w.Ones(p + "post_attention_layernorm.weight", d);
    w.Normal(p + "self_attn.q_proj.weight", {cfg.q_width(), d}, std);
    w.Normal(p + "self_attn.k_proj.weight", {cfg.kv_width(), d}, std);
    w.Normal(p + "self_attn.v_proj.weight", {cfg.kv_width(), d}, std);
    w.Normal(p + "self_attn.o_proj.weight", {d, cfg.q_width()}, out_std);
    w.Normal(p + "mlp.gate_proj.weight", {cfg.intermediate_size, d}, std);
    w.Normal(p + "mlp.up_proj.weight", {cfg.intermediate_size, d}, std);
    w.Normal(p + "mlp.down_proj.weight", {d, cfg.intermediate_size}, out_std);
  }
  return WriteModelDir(options, text, tok.json, w.tensors());
}

absl::Status WriteRandomRatModel(const InitModelOptions& options) {
  if (options.out_dir.empty()) {
    return absl::InvalidArgumentError("init-model: out_dir is empty");
  }
  TWICE_ASSIGN_OR_RETURN(InitTokenizer tok,
                         ReadInitTokenizer(options.tokenizer_json));
  Json c;
  c["architecture"] = "rat";
  c["model_type"] = "rat";
  c["vocab_size"] = tok.vocab;
  c["norm_eps"] = 1e-6;
  c["rope_base"] = 10000.0;
  c["tie_embedding"] = true;
  c["training_context"] = 4096;
  c["chunk_size"] = 16;
  c["ngroups"] = 2;
  if (tok.eos >= 0) c["eos_token_id"] = tok.eos;
  if (options.preset == "tiny" || options.preset == "tiny-swa") {
    c["d_model"] = 64;
    c["num_layers"] = 2;
    c["num_heads"] = 4;
    c["ffn_hidden"] = 256;
    c["interleave_step"] = options.preset == "tiny-swa" ? 2 : 0;
    c["window"] = 32;
  } else if (options.preset == "rat-xl-shape") {
    c["d_model"] = 2048;
    c["num_layers"] = 6;
    c["num_heads"] = 16;
    c["ffn_hidden"] = 8192;
    c["interleave_step"] = 0;
    c["window"] = 1024;
  } else {
    return UnknownPreset("rat", options.preset,
                         "\"tiny\", \"tiny-swa\" or \"rat-xl-shape\"");
  }
  const std::string text = c.dump(2) + "\n";
  TWICE_ASSIGN_OR_RETURN(RatConfig cfg, ParseRatConfig(text));
  RandomWeights w(options.seed);
  const int64_t d = cfg.hidden_size;
  const double std = 0.02, out_std = std / std::sqrt(2.0 * cfg.num_layers);
  w.Normal("embedding.wte.weight", {cfg.vocab_size, d}, std);
  w.Ones("backbone.ln.weight", d);
  for (int i = 0; i < cfg.num_layers; ++i) {
    const std::string p = absl::StrCat("backbone.layers.", i, ".");
    w.Ones(p + "seq_layer.input_norm.weight", d);
    if (cfg.is_swa(i)) {
      w.Normal(p + "seq_layer.in_proj.weight", {3 * d, d}, std);
    } else {
      w.Normal(p + "seq_layer.in_proj.weight", {cfg.in_proj_rows(), d}, std);
      // log(U[1, L - 1]) per channel, as upstream initialises it.
      w.LogUniform(p + "seq_layer.gate_bias", {d}, 1.0,
                   std::max<double>(1.0, cfg.chunk_size - 1.0));
    }
    w.Normal(p + "seq_layer.out_proj.weight", {d, d}, out_std);
    w.Ones(p + "hidden_layer.ln.weight", d);
    w.Normal(p + "hidden_layer.fc1.weight", {cfg.ffn_hidden, d}, std);
    w.Normal(p + "hidden_layer.fc2.weight", {d, cfg.ffn_hidden}, out_std);
  }
  return WriteModelDir(options, text, tok.json, w.tensors());
}

}  // namespace twice::engine
