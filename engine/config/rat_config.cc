#include "engine/config/rat_config.h"

#include "absl/strings/str_cat.h"
#include "engine/config/json_fields.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

using config::kMaxContext;
using config::kMaxHidden;
using config::kMaxLayers;
using config::kMaxVocab;

}  // namespace

absl::StatusOr<RatConfig> ParseRatConfig(std::string_view json) {
  using config::GetInt;
  TWICE_ASSIGN_OR_RETURN(config::Json root, config::ParseObject(json));
  RatConfig c;
  const std::string arch = config::ConfigArchitecture(json);
  if (arch != "rat") {
    return config::Invalid("architecture",
                           absl::StrCat("is \"", arch, "\", not \"rat\""));
  }
  TWICE_ASSIGN_OR_RETURN(c.hidden_size, GetInt(root, {"d_model", "hidden_size"},
                                               std::nullopt, 2, kMaxHidden));
  TWICE_ASSIGN_OR_RETURN(int64_t layers,
                         GetInt(root, {"num_layers", "num_hidden_layers"},
                                std::nullopt, 1, kMaxLayers));
  c.num_layers = static_cast<int>(layers);
  TWICE_ASSIGN_OR_RETURN(int64_t heads,
                         GetInt(root, {"num_heads", "num_attention_heads"},
                                std::nullopt, 1, c.hidden_size));
  c.num_heads = static_cast<int>(heads);
  if (c.hidden_size % heads != 0 || (c.hidden_size / heads) % 2 != 0) {
    return config::Invalid("num_heads",
                           "must split d_model into even head dimensions");
  }
  c.head_dim = c.hidden_size / heads;
  TWICE_ASSIGN_OR_RETURN(int64_t groups,
                         GetInt(root, {"ngroups"}, 2, 1, heads));
  if (heads % groups != 0) {
    return config::Invalid("ngroups", "must divide num_heads");
  }
  c.ngroups = static_cast<int>(groups);
  TWICE_ASSIGN_OR_RETURN(c.chunk_size,
                         GetInt(root, {"chunk_size"}, 16, 1, kMaxContext));
  TWICE_ASSIGN_OR_RETURN(c.ffn_hidden,
                         GetInt(root, {"ffn_hidden", "intermediate_size"},
                                4 * c.hidden_size, 1, 16 * kMaxHidden));
  TWICE_ASSIGN_OR_RETURN(
      c.vocab_size, GetInt(root, {"vocab_size"}, std::nullopt, 1, kMaxVocab));
  TWICE_ASSIGN_OR_RETURN(double eps,
                         config::GetNumber(root, "norm_eps", 1e-6, 0, 1));
  c.norm_eps = static_cast<float>(eps);
  TWICE_ASSIGN_OR_RETURN(double base,
                         config::GetNumber(root, "rope_base", 1e4, 1, 1e12));
  c.rope_base = static_cast<float>(base);
  TWICE_ASSIGN_OR_RETURN(int64_t step,
                         GetInt(root, {"interleave_step"}, 0, 0, 2));
  if (step == 1) step = 0;  // every layer RAT
  c.interleave_step = static_cast<int>(step);
  TWICE_ASSIGN_OR_RETURN(c.window,
                         GetInt(root, {"window"}, 1024, 1, kMaxContext));
  TWICE_ASSIGN_OR_RETURN(c.tie_embedding,
                         config::GetBool(root, "tie_embedding", true));
  TWICE_ASSIGN_OR_RETURN(c.eos_token_id,
                         GetInt(root, {"eos_token_id"}, -1, -1, kMaxVocab - 1));
  TWICE_ASSIGN_OR_RETURN(c.training_context, GetInt(root, {"training_context"},
                                                    4096, 1, kMaxContext));
  c.canonical_json = root.dump();
  return c;
}

}  // namespace twice::engine
