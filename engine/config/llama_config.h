// LlamaConfig: the hyper-parameters of a Llama-style Transformer, read from a
// HuggingFace LlamaForCausalLM config.json.
//
// Keys read (defaults after "="):
//   architecture | model_type | architectures[0]   "llama" / LlamaForCausalLM
//   hidden_size                 d
//   num_hidden_layers
//   num_attention_heads         H
//   num_key_value_heads = H     H_kv; H must be a multiple (grouped-query)
//   head_dim = d / H            must be even (rotate-half RoPE)
//   intermediate_size           SwiGLU width
//   vocab_size
//   rms_norm_eps = 1e-6
//   rope_theta = 10000
//   tie_word_embeddings = false (HF default)
//   eos_token_id = -1
//   training_context, else max_position_embeddings, else 2048
// Unknown keys (rope_scaling among them) are ignored; a non-null
// rope_scaling is rejected because this engine applies plain RoPE.
#ifndef TWICE_ENGINE_CONFIG_LLAMA_CONFIG_H_
#define TWICE_ENGINE_CONFIG_LLAMA_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace twice::engine {

struct LlamaConfig {
  std::string architecture = "llama";
  int64_t hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  float rms_norm_eps = 1e-6f;
  float rope_theta = 10000.0f;
  bool tie_word_embeddings = false;
  int64_t eos_token_id = -1;
  int64_t training_context = 2048;
  // Sorted-key, whitespace-free re-serialisation (fingerprinted).
  std::string canonical_json;

  int64_t q_width() const { return num_heads * head_dim; }
  int64_t kv_width() const { return num_kv_heads * head_dim; }
};

[[nodiscard]] absl::StatusOr<LlamaConfig> ParseLlamaConfig(
    std::string_view json);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_CONFIG_LLAMA_CONFIG_H_
