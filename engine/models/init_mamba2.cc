#include "engine/models/init_mamba2.h"

#include <cmath>
#include <map>
#include <numbers>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/config/mamba2_config.h"
#include "engine/models/random_model_dir.h"
#include "engine/tensor/tensor.h"
#include "engine/util/absl_view.h"
#include "kernels/status_macros.h"
#include "nlohmann/json.hpp"

namespace twice::engine {
namespace {

using Json = nlohmann::json;

[[nodiscard]] absl::StatusOr<Json> PresetConfig(std::string_view preset,
                                                int64_t vocab, int64_t eos) {
  Json ssm = {
      {"layer", "Mamba2"}, {"d_conv", 4}, {"expand", 2}, {"ngroups", 1}};
  Json c;
  if (preset == "tiny") {
    c["d_model"] = 64;
    c["n_layer"] = 2;
    ssm["d_state"] = 16;
    ssm["headdim"] = 16;
    ssm["chunk_size"] = 64;
  } else if (preset == "mamba2-130m-shape") {
    c["d_model"] = 768;
    c["n_layer"] = 24;
    ssm["d_state"] = 128;
    ssm["headdim"] = 64;
    ssm["chunk_size"] = 256;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("init-model: unknown mamba2 preset \"", AbslView(preset),
                     "\" (expected \"tiny\" or \"mamba2-130m-shape\")"));
  }
  c["architecture"] = "mamba2";
  c["d_intermediate"] = 0;
  c["vocab_size"] = vocab;
  c["ssm_cfg"] = ssm;
  c["attn_layer_idx"] = Json::array();
  c["attn_cfg"] = Json::object();
  c["rms_norm"] = true;
  c["residual_in_fp32"] = true;
  c["fused_add_norm"] = true;
  c["pad_vocab_size_multiple"] = 16;
  c["tie_embeddings"] = true;
  c["training_context"] = 2048;
  if (eos >= 0) c["eos_token_id"] = eos;
  return c;
}

std::map<std::string, Tensor> Mamba2Weights(const Mamba2Config& c,
                                            uint64_t seed) {
  const int64_t d = c.hidden_size;
  const int64_t h = c.num_heads();
  const double std = 0.02;
  const double out_std = std / std::sqrt(2.0 * c.num_layers);
  std::map<std::string, Tensor> w;
  auto normal = [&](const std::string& name, Shape shape, double s) {
    w.emplace(name, RandomNormal(name, std::move(shape), s, seed));
  };
  normal("backbone.embedding.weight", {c.padded_vocab_size(), d}, std);
  w.emplace("backbone.norm_f.weight", Filled({d}, 1.0f));
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("backbone.layers.", i, ".");
    w.emplace(p + "norm.weight", Filled({d}, 1.0f));
    normal(p + "mixer.in_proj.weight", {c.d_in_proj(), d}, std);
    normal(p + "mixer.conv1d.weight", {c.conv_dim(), 1, c.d_conv}, 0.1);
    normal(p + "mixer.conv1d.bias", {c.conv_dim()}, std);
    normal(p + "mixer.out_proj.weight", {d, c.d_inner()}, out_std);
    w.emplace(p + "mixer.norm.weight", Filled({c.d_inner()}, 1.0f));
    w.emplace(p + "mixer.D", Filled({h}, 1.0f));
    Tensor dt_bias = Tensor::Zeros({h});
    Tensor a_log = Tensor::Zeros({h});
    for (int64_t j = 0; j < h; ++j) {
      const double f = (static_cast<double>(j) + 0.5) / static_cast<double>(h);
      const double dt =
          std::exp(std::log(1e-3) + f * (std::log(0.1) - std::log(1e-3)));
      // softplus⁻¹(dt) = dt + log(1 - e^-dt)
      dt_bias.mutable_data()[j] =
          static_cast<float>(dt + std::log(-std::expm1(-dt)));
      a_log.mutable_data()[j] = static_cast<float>(std::log(1.0 + 15.0 * f));
    }
    w.emplace(p + "mixer.dt_bias", std::move(dt_bias));
    w.emplace(p + "mixer.A_log", std::move(a_log));
  }
  return w;
}

}  // namespace

absl::Status WriteRandomMamba2Model(const InitModelOptions& options) {
  TWICE_ASSIGN_OR_RETURN(const InitTokenizer tok,
                         ReadInitTokenizer(options.tokenizer_json));
  TWICE_ASSIGN_OR_RETURN(Json config_json,
                         PresetConfig(options.preset, tok.vocab, tok.eos));
  const std::string config_text = config_json.dump(2) + "\n";
  // Derive every shape from the parsed config, as LoadModel will.
  TWICE_ASSIGN_OR_RETURN(Mamba2Config config, ParseMamba2Config(config_text));
  return WriteModelDir(options, config_text, tok.json,
                       Mamba2Weights(config, options.seed));
}

}  // namespace twice::engine
