// NemotronHConfig: the hyper-parameters of an NVIDIA Nemotron-H hybrid
// (transformers `NemotronHForCausalLM`, model_type "nemotron_h"), read from
// its config.json as published.
//
// Keys read (legacy aliases in parentheses; defaults after "="):
//   model_type | architectures[0]   "nemotron_h" / NemotronHForCausalLM
//   hybrid_override_pattern          one character per layer: M Mamba-2,
//                                    * attention, - MLP (E, MoE: refused)
//   num_hidden_layers                optional; the pattern's length when set
//   hidden_size                      d
//   mamba_num_heads, mamba_head_dim  H, P; the SSM width is H·P (not
//                                    expand·d)
//   n_groups (mamba_n_groups) = 8    G
//   ssm_state_size = 128             N
//   conv_kernel (mamba_d_conv) = 4   K
//   chunk_size (mamba_chunk_size) = 128
//   num_attention_heads, num_key_value_heads = heads, head_dim
//   (attention_head_dim) = d / heads      needed with a * layer
//   intermediate_size                needed with a - layer
//   layer_norm_epsilon = 1e-5        every RMSNorm, the gated one included
//   vocab_size, tie_word_embeddings = false, eos_token_id = -1
//   training_context, else max_position_embeddings, else 8192
// Must hold when present (the layouts the engine implements):
// mlp_hidden_act "relu2", mamba_hidden_act "silu", use_bias, mlp_bias and
// attention_bias false, use_conv_bias (mamba_conv_bias) true,
// time_step_limit [0, Infinity] (no clamp). Unknown keys are ignored
// (residual_in_fp32 among them: the residual is f32 here anyway); invalid
// values are INVALID_ARGUMENT naming the key.
#ifndef TWICE_ENGINE_CONFIG_NEMOTRON_H_CONFIG_H_
#define TWICE_ENGINE_CONFIG_NEMOTRON_H_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace twice::engine {

enum class NemotronHLayerKind { kMamba, kAttention, kMlp };

struct NemotronHConfig {
  std::string architecture = "nemotron_h";
  int64_t hidden_size = 0;
  std::string pattern;  // hybrid_override_pattern, one char per layer
  int64_t mamba_heads = 0;
  int64_t mamba_head_dim = 0;
  int64_t n_groups = 8;
  int64_t ssm_state_size = 128;
  int64_t conv_kernel = 4;
  int64_t chunk_size = 128;
  int64_t num_heads = 0;  // 0 without attention layers
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;  // 0 without MLP layers
  float norm_eps = 1e-5f;
  int64_t vocab_size = 0;
  bool tie_word_embeddings = false;
  int64_t eos_token_id = -1;
  int64_t training_context = 8192;
  // Sorted-key, whitespace-free re-serialisation (fingerprinted).
  std::string canonical_json;

  int num_layers() const { return static_cast<int>(pattern.size()); }
  NemotronHLayerKind kind(int layer) const;
  int64_t mamba_inner() const { return mamba_heads * mamba_head_dim; }
};

[[nodiscard]] absl::StatusOr<NemotronHConfig> ParseNemotronHConfig(
    std::string_view json);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_CONFIG_NEMOTRON_H_CONFIG_H_
