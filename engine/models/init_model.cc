#include "engine/models/init_model.h"

#include <cmath>
#include <map>
#include <numbers>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/config/based_config.h"
#include "engine/models/init_hybrid.h"
#include "engine/models/init_llama_rat.h"
#include "engine/models/init_mamba2.h"
#include "engine/models/random_model_dir.h"
#include "engine/tensor/tensor.h"
#include "engine/util/absl_view.h"
#include "kernels/status_macros.h"
#include "nlohmann/json.hpp"

namespace twice::engine {
namespace {

using Json = nlohmann::json;

// Hydra target of the JRT mixer in upstream configs; LoadModel recognises a
// JRT config by it even without the "architecture" key.
constexpr char kPrefixLinearAttentionTarget[] =
    "based.models.mixers.prefix_linear_attention.PrefixLinearAttention";

[[nodiscard]] absl::StatusOr<Json> PresetConfig(std::string_view architecture,
                                                std::string_view preset,
                                                int64_t vocab, int64_t eos) {
  const bool jrt = architecture == "jrt";
  Json c;
  c["architecture"] = std::string(architecture);
  c["model_type"] = std::string(architecture);
  c["vocab_size"] = vocab;
  c["pad_vocab_size_multiple"] = 8;
  c["layer_norm_epsilon"] = 1e-5;
  c["rotary_emb_base"] = 10000.0;
  c["activation_function"] = "swiglu";
  c["rms_norm"] = true;
  c["residual_in_fp32"] = true;
  c["tie_word_embeddings"] = true;
  c["training_context"] = 2048;
  c["mixer"] = {{"expand_proj", 4}, {"kernel_sizes", 3}, {"use_bias", true}};
  if (eos >= 0) {
    c["eos_token_id"] = eos;
    c["bos_token_id"] = eos;
  }
  if (preset == "tiny") {
    // JRT tiny: the same shape with M = 64, so tests cover reads shorter
    // than, equal to and longer than the encoder cheaply.
    c["n_embd"] = 64;
    c["n_layer"] = 4;
    c["n_head"] = 4;
    c["n_inner"] = 128;
    c["alt_mixer"] = {{"feature_dim", 16}, {"num_heads", 4}};
    c["alt_mixer_2"] = {{"window_size", 64}};
    c["alt_mixer_layers"] = {1};
    c["alt_mixer_2_layers"] = {2};
  } else if (preset == "360m-shape") {
    // based-360m, or JRT-360M: one BaseConv layer fewer (26), the linear
    // attention and sliding-window indices unchanged.
    c["n_embd"] = 1024;
    c["n_layer"] = jrt ? 26 : 27;
    c["n_head"] = 16;
    c["n_inner"] = 2048;
    c["alt_mixer"] = {{"feature_dim", 16}, {"num_heads", 16}};
    c["alt_mixer_2"] = {{"window_size", 256}};
    c["alt_mixer_layers"] = {1, 6, 11, 16, 21};
    c["alt_mixer_2_layers"] = {2, 7, 12, 17, 22};
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("init-model: unknown preset \"", AbslView(preset),
                     "\" (expected \"tiny\" or \"360m-shape\")"));
  }
  if (jrt) {
    c["alt_mixer"]["_target_"] = kPrefixLinearAttentionTarget;
    c["alt_mixer"]["enc_length"] = preset == "tiny" ? 64 : 1024;
  }
  return c;
}

// Every tensor of a Based model with its random initialisation: linear and
// embedding weights N(0, 0.02), projections back into the residual stream
// scaled by 1/sqrt(2 · layers) (GPT-2), biases N(0, 0.02), norms 1, conv
// taps N(0, 0.1).
std::map<std::string, Tensor> BasedWeights(const BasedConfig& c,
                                           uint64_t seed) {
  const int64_t d = c.hidden_size;
  const int64_t inner = c.conv_inner();
  const int64_t qk = c.linear_attention_heads * c.feature_dim;
  const int64_t hidden = c.mlp_hidden();
  const double std = 0.02;
  const double out_std = std / std::sqrt(2.0 * c.num_layers);
  std::map<std::string, Tensor> w;
  auto normal = [&](const std::string& name, Shape shape, double s) {
    w.emplace(name, RandomNormal(name, std::move(shape), s, seed));
  };
  normal("transformer.embeddings.word_embeddings.weight",
         {c.padded_vocab_size(), d}, std);
  w.emplace("transformer.ln_f.weight", Filled({d}, 1.0f));
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("transformer.layers.", i, ".");
    w.emplace(p + "norm1.weight", Filled({d}, 1.0f));
    w.emplace(p + "norm2.weight", Filled({d}, 1.0f));
    normal(p + "mlp.fc1.weight", {2 * hidden, d}, std);
    normal(p + "mlp.fc2.weight", {d, hidden}, out_std);
    switch (c.mixer(i)) {
      case BasedMixerKind::kBaseConv:
        normal(p + "mixer.in_proj.weight", {2 * inner, d}, std);
        normal(p + "mixer.in_proj.bias", {2 * inner}, std);
        normal(p + "mixer.out_proj.weight", {d, inner}, out_std);
        normal(p + "mixer.out_proj.bias", {d}, std);
        normal(p + "mixer.conv.conv.weight", {inner, 1, c.conv_kernel_size},
               0.1);
        break;
      case BasedMixerKind::kPrefixLinearAttention:
        normal(p + "mixer.proj_k_enc.weight", {qk, d}, std);
        normal(p + "mixer.proj_v_enc.weight", {d, d}, std);
        [[fallthrough]];
      case BasedMixerKind::kLinearAttention:
        normal(p + "mixer.proj_q.weight", {qk, d}, std);
        normal(p + "mixer.proj_k.weight", {qk, d}, std);
        normal(p + "mixer.proj_v.weight", {d, d}, std);
        normal(p + "mixer.out_proj.weight", {d, d}, out_std);
        break;
      case BasedMixerKind::kSlidingWindow:
        normal(p + "mixer.Wqkv.weight", {3 * d, d}, std);
        normal(p + "mixer.out_proj.weight", {d, d}, out_std);
        break;
    }
  }
  return w;
}

}  // namespace

absl::Status WriteRandomModel(const InitModelOptions& options) {
  if (options.architecture == "mamba2") return WriteRandomMamba2Model(options);
  if (options.architecture == "llama") return WriteRandomLlamaModel(options);
  if (options.architecture == "rat") return WriteRandomRatModel(options);
  if (options.architecture == "nemotron_h") {
    return WriteRandomNemotronHModel(options);
  }
  if (options.architecture == "granitemoehybrid") {
    return WriteRandomGraniteHybridModel(options);
  }
  if (options.architecture != "based" && options.architecture != "jrt") {
    return absl::InvalidArgumentError(absl::StrCat(
        "init-model: unknown architecture \"", options.architecture,
        "\" (expected based, jrt, mamba2, llama, rat, nemotron_h or "
        "granitemoehybrid)"));
  }
  TWICE_ASSIGN_OR_RETURN(const InitTokenizer tok,
                         ReadInitTokenizer(options.tokenizer_json));
  TWICE_ASSIGN_OR_RETURN(
      Json config_json,
      PresetConfig(options.architecture, options.preset, tok.vocab, tok.eos));
  const std::string config_text = config_json.dump(2) + "\n";
  // Derive every shape from the parsed config, as LoadModel will.
  TWICE_ASSIGN_OR_RETURN(BasedConfig config, ParseBasedConfig(config_text));

  return WriteModelDir(options, config_text, tok.json,
                       BasedWeights(config, options.seed));
}

}  // namespace twice::engine
