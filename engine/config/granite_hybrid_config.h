// GraniteHybridConfig: the hyper-parameters of an IBM Granite-4.0-H hybrid
// (transformers `GraniteMoeHybridForCausalLM`, model_type
// "granitemoehybrid"), dense or with experts, read from its config.json as
// published.
//
// Keys read (defaults after "="):
//   model_type | architectures[0]   "granitemoehybrid" /
//                                    GraniteMoeHybridForCausalLM
//   layer_types                      "mamba" | "attention" per layer
//   num_hidden_layers                the length of layer_types
//   hidden_size                      d
//   mamba_n_heads, mamba_d_head      H, P; H·P must be mamba_expand · d
//   mamba_expand = 2, mamba_n_groups = 1, mamba_d_state = 128,
//   mamba_d_conv = 4, mamba_chunk_size = 256
//   num_attention_heads, num_key_value_heads = heads   (hd = d / heads)
//   shared_intermediate_size         the SwiGLU MLP every layer has
//   num_local_experts = 0            E routed SwiGLU experts per layer next
//                                    to the shared MLP (0: dense)
//   num_experts_per_tok              k, 1..E (required when E > 0)
//   intermediate_size                each expert's width (required when
//                                    E > 0)
//   rms_norm_eps = 1e-6              every RMSNorm, the gated one included
//   embedding_multiplier = 1, residual_multiplier = 1,
//   attention_multiplier = hd^-1/2 (the softmax scale), logits_scaling = 1
//   vocab_size, tie_word_embeddings = true, eos_token_id = -1
//   training_context, else max_position_embeddings, else 4096
// Must hold when present: position_embedding_type "nope", hidden_act "silu",
// attention_bias and mamba_proj_bias false, mamba_conv_bias true,
// time_step_limit [0, Infinity]. Unknown keys are ignored; invalid values
// are INVALID_ARGUMENT naming the key.
#ifndef TWICE_ENGINE_CONFIG_GRANITE_HYBRID_CONFIG_H_
#define TWICE_ENGINE_CONFIG_GRANITE_HYBRID_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace twice::engine {

struct GraniteHybridConfig {
  std::string architecture = "granitemoehybrid";
  int64_t hidden_size = 0;
  std::vector<bool> is_attention;  // per layer; false: Mamba-2
  int64_t mamba_heads = 0;
  int64_t mamba_head_dim = 0;
  int64_t n_groups = 1;
  int64_t d_state = 128;
  int64_t d_conv = 4;
  int64_t chunk_size = 256;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;         // shared_intermediate_size
  int64_t experts = 0;                   // num_local_experts; 0: dense
  int64_t experts_per_token = 0;         // num_experts_per_tok
  int64_t expert_intermediate_size = 0;  // intermediate_size
  float norm_eps = 1e-6f;
  float embedding_multiplier = 1.0f;
  float residual_multiplier = 1.0f;
  float attention_multiplier = 0.0f;  // set by the parser
  float logits_scaling = 1.0f;
  int64_t vocab_size = 0;
  bool tie_word_embeddings = true;
  int64_t eos_token_id = -1;
  int64_t training_context = 4096;
  // Sorted-key, whitespace-free re-serialisation (fingerprinted).
  std::string canonical_json;

  int num_layers() const { return static_cast<int>(is_attention.size()); }
  int64_t mamba_inner() const { return mamba_heads * mamba_head_dim; }
};

[[nodiscard]] absl::StatusOr<GraniteHybridConfig> ParseGraniteHybridConfig(
    std::string_view json);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_CONFIG_GRANITE_HYBRID_CONFIG_H_
