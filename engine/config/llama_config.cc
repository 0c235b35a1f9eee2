#include "engine/config/llama_config.h"

#include "absl/strings/str_cat.h"
#include "engine/config/json_fields.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

// The bounds every config parser shares (json_fields.h).
using config::kMaxContext;
using config::kMaxHidden;
using config::kMaxLayers;
using config::kMaxVocab;

}  // namespace

absl::StatusOr<LlamaConfig> ParseLlamaConfig(std::string_view json) {
  using config::GetInt;
  TWICE_ASSIGN_OR_RETURN(config::Json root, config::ParseObject(json));
  LlamaConfig c;
  const std::string arch = config::ConfigArchitecture(json);
  if (arch != "llama") {
    return config::Invalid("architecture",
                           absl::StrCat("is \"", arch, "\", not \"llama\""));
  }
  TWICE_ASSIGN_OR_RETURN(c.hidden_size, GetInt(root, {"hidden_size"},
                                               std::nullopt, 2, kMaxHidden));
  TWICE_ASSIGN_OR_RETURN(int64_t layers, GetInt(root, {"num_hidden_layers"},
                                                std::nullopt, 1, kMaxLayers));
  c.num_layers = static_cast<int>(layers);
  TWICE_ASSIGN_OR_RETURN(int64_t heads, GetInt(root, {"num_attention_heads"},
                                               std::nullopt, 1, c.hidden_size));
  c.num_heads = static_cast<int>(heads);
  TWICE_ASSIGN_OR_RETURN(
      int64_t kv_heads, GetInt(root, {"num_key_value_heads"}, heads, 1, heads));
  c.num_kv_heads = static_cast<int>(kv_heads);
  if (heads % kv_heads != 0) {
    return config::Invalid(
        "num_key_value_heads",
        absl::StrCat("(", kv_heads, ") must divide num_attention_heads (",
                     heads, ")"));
  }
  const int64_t default_head_dim =
      c.hidden_size % heads == 0 ? c.hidden_size / heads : 0;
  TWICE_ASSIGN_OR_RETURN(
      c.head_dim,
      GetInt(root, {"head_dim"},
             default_head_dim > 0 ? std::optional<int64_t>(default_head_dim)
                                  : std::nullopt,
             2, kMaxHidden));
  if (c.head_dim % 2 != 0) {
    return config::Invalid("head_dim", "must be even for rotary embeddings");
  }
  TWICE_ASSIGN_OR_RETURN(
      c.intermediate_size,
      GetInt(root, {"intermediate_size"}, std::nullopt, 1, 16 * kMaxHidden));
  TWICE_ASSIGN_OR_RETURN(
      c.vocab_size, GetInt(root, {"vocab_size"}, std::nullopt, 1, kMaxVocab));
  TWICE_ASSIGN_OR_RETURN(double eps,
                         config::GetNumber(root, "rms_norm_eps", 1e-6, 0, 1));
  c.rms_norm_eps = static_cast<float>(eps);
  TWICE_ASSIGN_OR_RETURN(double theta,
                         config::GetNumber(root, "rope_theta", 1e4, 1.0, 1e12));
  c.rope_theta = static_cast<float>(theta);
  if (auto it = root.find("rope_scaling"); it != root.end() && !it->is_null()) {
    return config::Invalid("rope_scaling",
                           "is not supported (plain RoPE only); remove it or "
                           "set it to null");
  }
  TWICE_ASSIGN_OR_RETURN(c.tie_word_embeddings,
                         config::GetBool(root, "tie_word_embeddings", false));
  TWICE_ASSIGN_OR_RETURN(c.eos_token_id,
                         GetInt(root, {"eos_token_id"}, -1, -1, kMaxVocab - 1));
  TWICE_ASSIGN_OR_RETURN(
      int64_t max_pos,
      GetInt(root, {"max_position_embeddings"}, 0, 0, kMaxContext));
  TWICE_ASSIGN_OR_RETURN(c.training_context,
                         GetInt(root, {"training_context"},
                                max_pos > 0 ? max_pos : 2048, 1, kMaxContext));
  c.canonical_json = root.dump();
  return c;
}

}  // namespace twice::engine
