#include "engine/config/nemotron_h_config.h"

#include "absl/strings/str_cat.h"
#include "engine/config/json_fields.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

// The bounds every config parser shares (json_fields.h).
using config::kMaxHidden;
using config::kMaxLayers;
using config::kMaxVocab;

using config::GetBool;
using config::GetInt;
using config::Invalid;
using config::Json;

}  // namespace

NemotronHLayerKind NemotronHConfig::kind(int layer) const {
  switch (pattern[layer]) {
    case 'M':
      return NemotronHLayerKind::kMamba;
    case '*':
      return NemotronHLayerKind::kAttention;
    default:
      return NemotronHLayerKind::kMlp;
  }
}

absl::StatusOr<NemotronHConfig> ParseNemotronHConfig(std::string_view json) {
  TWICE_ASSIGN_OR_RETURN(Json root, config::ParseObject(json));
  NemotronHConfig c;
  const std::string arch = config::ConfigArchitecture(json);
  if (arch != "nemotron_h") {
    return Invalid("model_type",
                   absl::StrCat("is \"", arch, "\", not \"nemotron_h\""));
  }
  TWICE_ASSIGN_OR_RETURN(c.pattern,
                         config::GetString(root, "hybrid_override_pattern"));
  if (c.pattern.empty() ||
      static_cast<int64_t>(c.pattern.size()) > kMaxLayers) {
    return Invalid("hybrid_override_pattern",
                   "is required: one of M, * or - per layer");
  }
  bool has_attention = false, has_mlp = false;
  for (size_t i = 0; i < c.pattern.size(); ++i) {
    const char k = c.pattern[i];
    if (k == 'E') {
      return Invalid("hybrid_override_pattern",
                     absl::StrCat("has a mixture-of-experts layer (E) at ", i,
                                  "; MoE Nemotron-H models are not supported"));
    }
    if (k != 'M' && k != '*' && k != '-') {
      return Invalid("hybrid_override_pattern",
                     absl::StrCat("has '", std::string(1, k), "' at ", i,
                                  "; only M, * and - are layer kinds"));
    }
    has_attention |= k == '*';
    has_mlp |= k == '-';
  }
  const int64_t layers = static_cast<int64_t>(c.pattern.size());
  TWICE_ASSIGN_OR_RETURN(int64_t declared, GetInt(root, {"num_hidden_layers"},
                                                  layers, 1, kMaxLayers));
  if (declared != layers) {
    return Invalid("num_hidden_layers",
                   absl::StrCat("is ", declared,
                                " but hybrid_override_pattern "
                                "has ",
                                layers, " layers"));
  }
  TWICE_ASSIGN_OR_RETURN(c.hidden_size, GetInt(root, {"hidden_size"},
                                               std::nullopt, 1, kMaxHidden));
  TWICE_ASSIGN_OR_RETURN(c.mamba_heads, GetInt(root, {"mamba_num_heads"},
                                               std::nullopt, 1, kMaxHidden));
  TWICE_ASSIGN_OR_RETURN(c.mamba_head_dim, GetInt(root, {"mamba_head_dim"},
                                                  std::nullopt, 1, kMaxHidden));
  if (c.mamba_inner() > 16 * kMaxHidden) {
    return Invalid("mamba_num_heads", "times mamba_head_dim is too large");
  }
  TWICE_ASSIGN_OR_RETURN(
      c.n_groups,
      GetInt(root, {"n_groups", "mamba_n_groups"}, 8, 1, c.mamba_heads));
  if (c.mamba_heads % c.n_groups != 0) {
    return Invalid("n_groups", absl::StrCat("(", c.n_groups,
                                            ") must divide mamba_num_heads (",
                                            c.mamba_heads, ")"));
  }
  TWICE_ASSIGN_OR_RETURN(c.ssm_state_size,
                         GetInt(root, {"ssm_state_size"}, 128, 1, 1 << 12));
  TWICE_ASSIGN_OR_RETURN(
      c.conv_kernel, GetInt(root, {"conv_kernel", "mamba_d_conv"}, 4, 1, 64));
  TWICE_ASSIGN_OR_RETURN(
      c.chunk_size,
      GetInt(root, {"chunk_size", "mamba_chunk_size"}, 128, 1, 1 << 16));
  if (has_attention) {
    TWICE_ASSIGN_OR_RETURN(c.num_heads, GetInt(root, {"num_attention_heads"},
                                               std::nullopt, 1, kMaxHidden));
    TWICE_ASSIGN_OR_RETURN(c.num_kv_heads, GetInt(root, {"num_key_value_heads"},
                                                  c.num_heads, 1, c.num_heads));
    if (c.num_heads % c.num_kv_heads != 0) {
      return Invalid("num_key_value_heads",
                     absl::StrCat("(", c.num_kv_heads,
                                  ") must divide num_attention_heads (",
                                  c.num_heads, ")"));
    }
    const int64_t fallback =
        c.hidden_size % c.num_heads == 0 ? c.hidden_size / c.num_heads : 0;
    TWICE_ASSIGN_OR_RETURN(
        c.head_dim,
        GetInt(root, {"head_dim", "attention_head_dim"},
               fallback > 0 ? std::optional<int64_t>(fallback) : std::nullopt,
               1, kMaxHidden));
  }
  if (has_mlp) {
    TWICE_ASSIGN_OR_RETURN(
        c.intermediate_size,
        GetInt(root, {"intermediate_size"}, std::nullopt, 1, 16 * kMaxHidden));
  }
  TWICE_RETURN_IF_ERROR(config::RequireString(root, "mlp_hidden_act", "relu2"));
  TWICE_RETURN_IF_ERROR(
      config::RequireString(root, "mamba_hidden_act", "silu"));
  for (const char* key : {"use_bias", "mlp_bias", "attention_bias"}) {
    TWICE_RETURN_IF_ERROR(config::RequireBool(root, key, false));
  }
  TWICE_RETURN_IF_ERROR(config::RequireBool(root, "use_conv_bias", true));
  TWICE_RETURN_IF_ERROR(config::RequireBool(root, "mamba_conv_bias", true));
  TWICE_RETURN_IF_ERROR(config::RequireNoDtClamp(root));
  TWICE_ASSIGN_OR_RETURN(
      double eps, config::GetNumber(root, "layer_norm_epsilon", 1e-5, 0, 1));
  c.norm_eps = static_cast<float>(eps);
  TWICE_ASSIGN_OR_RETURN(
      c.vocab_size, GetInt(root, {"vocab_size"}, std::nullopt, 1, kMaxVocab));
  TWICE_ASSIGN_OR_RETURN(c.tie_word_embeddings,
                         GetBool(root, "tie_word_embeddings", false));
  TWICE_ASSIGN_OR_RETURN(c.eos_token_id,
                         GetInt(root, {"eos_token_id"}, -1, -1, kMaxVocab - 1));
  TWICE_ASSIGN_OR_RETURN(c.training_context,
                         config::GetTrainingContext(root, 8192));
  c.canonical_json = root.dump();
  return c;
}

}  // namespace twice::engine
