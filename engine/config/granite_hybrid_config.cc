#include "engine/config/granite_hybrid_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/config/json_fields.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

// The bounds every config parser shares (json_fields.h).
using config::kMaxHidden;
using config::kMaxLayers;
using config::kMaxVocab;
constexpr int64_t kMaxExperts = 1 << 12;

using config::GetBool;
using config::GetInt;
using config::Invalid;
using config::Json;

absl::StatusOr<float> Multiplier(const Json& root, std::string_view key,
                                 double fallback) {
  TWICE_ASSIGN_OR_RETURN(double v,
                         config::GetNumber(root, key, fallback, 1e-6, 1e6));
  return static_cast<float>(v);
}

}  // namespace

absl::StatusOr<GraniteHybridConfig> ParseGraniteHybridConfig(
    std::string_view json) {
  TWICE_ASSIGN_OR_RETURN(Json root, config::ParseObject(json));
  GraniteHybridConfig c;
  const std::string arch = config::ConfigArchitecture(json);
  if (arch != "granitemoehybrid") {
    return Invalid("model_type",
                   absl::StrCat("is \"", arch, "\", not \"granitemoehybrid\""));
  }
  auto types = root.find("layer_types");
  if (types == root.end() || !types->is_array() || types->empty() ||
      static_cast<int64_t>(types->size()) > kMaxLayers) {
    return Invalid("layer_types",
                   "is required: \"mamba\" or \"attention\" per layer");
  }
  for (size_t i = 0; i < types->size(); ++i) {
    const Json& t = (*types)[i];
    if (!t.is_string() || (t.get<std::string>() != "mamba" &&
                           t.get<std::string>() != "attention")) {
      return Invalid("layer_types",
                     absl::StrCat("entry ", i, " is ", t.dump(),
                                  "; each must be \"mamba\" or \"attention\""));
    }
    c.is_attention.push_back(t.get<std::string>() == "attention");
  }
  const int64_t layers = static_cast<int64_t>(c.is_attention.size());
  TWICE_ASSIGN_OR_RETURN(int64_t declared, GetInt(root, {"num_hidden_layers"},
                                                  layers, 1, kMaxLayers));
  if (declared != layers) {
    return Invalid("num_hidden_layers",
                   absl::StrCat("is ", declared, " but layer_types has ",
                                layers, " entries"));
  }
  TWICE_ASSIGN_OR_RETURN(
      c.experts, GetInt(root, {"num_local_experts"}, 0, 0, kMaxExperts));
  TWICE_RETURN_IF_ERROR(
      config::RequireString(root, "position_embedding_type", "nope"));
  TWICE_RETURN_IF_ERROR(config::RequireString(root, "hidden_act", "silu"));
  TWICE_RETURN_IF_ERROR(config::RequireBool(root, "attention_bias", false));
  TWICE_RETURN_IF_ERROR(config::RequireBool(root, "mamba_proj_bias", false));
  TWICE_RETURN_IF_ERROR(config::RequireBool(root, "mamba_conv_bias", true));
  TWICE_RETURN_IF_ERROR(config::RequireNoDtClamp(root));
  TWICE_ASSIGN_OR_RETURN(c.hidden_size, GetInt(root, {"hidden_size"},
                                               std::nullopt, 1, kMaxHidden));
  const int64_t d = c.hidden_size;
  TWICE_ASSIGN_OR_RETURN(int64_t expand,
                         GetInt(root, {"mamba_expand"}, 2, 1, 64));
  TWICE_ASSIGN_OR_RETURN(c.mamba_heads, GetInt(root, {"mamba_n_heads"},
                                               std::nullopt, 1, kMaxHidden));
  TWICE_ASSIGN_OR_RETURN(c.mamba_head_dim, GetInt(root, {"mamba_d_head"},
                                                  std::nullopt, 1, kMaxHidden));
  if (c.mamba_inner() != expand * d) {
    return Invalid("mamba_d_head",
                   absl::StrCat("times mamba_n_heads is ", c.mamba_inner(),
                                ", but the SSM width is mamba_expand · "
                                "hidden_size = ",
                                expand * d));
  }
  TWICE_ASSIGN_OR_RETURN(c.n_groups,
                         GetInt(root, {"mamba_n_groups"}, 1, 1, c.mamba_heads));
  if (c.mamba_heads % c.n_groups != 0) {
    return Invalid(
        "mamba_n_groups",
        absl::StrCat("(", c.n_groups, ") must divide mamba_n_heads (",
                     c.mamba_heads, ")"));
  }
  TWICE_ASSIGN_OR_RETURN(c.d_state,
                         GetInt(root, {"mamba_d_state"}, 128, 1, 1 << 12));
  TWICE_ASSIGN_OR_RETURN(c.d_conv, GetInt(root, {"mamba_d_conv"}, 4, 1, 64));
  TWICE_ASSIGN_OR_RETURN(c.chunk_size,
                         GetInt(root, {"mamba_chunk_size"}, 256, 1, 1 << 16));
  TWICE_ASSIGN_OR_RETURN(
      c.num_heads, GetInt(root, {"num_attention_heads"}, std::nullopt, 1, d));
  if (d % c.num_heads != 0) {
    return Invalid(
        "num_attention_heads",
        absl::StrCat("(", c.num_heads, ") must divide hidden_size (", d, ")"));
  }
  c.head_dim = d / c.num_heads;
  TWICE_ASSIGN_OR_RETURN(c.num_kv_heads, GetInt(root, {"num_key_value_heads"},
                                                c.num_heads, 1, c.num_heads));
  if (c.num_heads % c.num_kv_heads != 0) {
    return Invalid(
        "num_key_value_heads",
        absl::StrCat("(", c.num_kv_heads, ") must divide num_attention_heads (",
                     c.num_heads, ")"));
  }
  TWICE_ASSIGN_OR_RETURN(c.intermediate_size,
                         GetInt(root, {"shared_intermediate_size"},
                                std::nullopt, 1, 16 * kMaxHidden));
  if (c.experts > 0) {
    TWICE_ASSIGN_OR_RETURN(
        c.experts_per_token,
        GetInt(root, {"num_experts_per_tok"}, std::nullopt, 1, c.experts));
    TWICE_ASSIGN_OR_RETURN(
        c.expert_intermediate_size,
        GetInt(root, {"intermediate_size"}, std::nullopt, 1, 16 * kMaxHidden));
  }
  TWICE_ASSIGN_OR_RETURN(double eps,
                         config::GetNumber(root, "rms_norm_eps", 1e-6, 0, 1));
  c.norm_eps = static_cast<float>(eps);
  TWICE_ASSIGN_OR_RETURN(c.embedding_multiplier,
                         Multiplier(root, "embedding_multiplier", 1.0));
  TWICE_ASSIGN_OR_RETURN(c.residual_multiplier,
                         Multiplier(root, "residual_multiplier", 1.0));
  TWICE_ASSIGN_OR_RETURN(
      c.attention_multiplier,
      Multiplier(root, "attention_multiplier",
                 1.0 / std::sqrt(static_cast<double>(c.head_dim))));
  TWICE_ASSIGN_OR_RETURN(c.logits_scaling,
                         Multiplier(root, "logits_scaling", 1.0));
  TWICE_ASSIGN_OR_RETURN(
      c.vocab_size, GetInt(root, {"vocab_size"}, std::nullopt, 1, kMaxVocab));
  TWICE_ASSIGN_OR_RETURN(c.tie_word_embeddings,
                         GetBool(root, "tie_word_embeddings", true));
  TWICE_ASSIGN_OR_RETURN(c.eos_token_id,
                         GetInt(root, {"eos_token_id"}, -1, -1, kMaxVocab - 1));
  TWICE_ASSIGN_OR_RETURN(c.training_context,
                         config::GetTrainingContext(root, 4096));
  c.canonical_json = root.dump();
  return c;
}

}  // namespace twice::engine
