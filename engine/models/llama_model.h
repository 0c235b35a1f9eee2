// LlamaModel: a Llama-style Transformer (HF LlamaForCausalLM), the softmax
// baseline with a growing full KV cache.
//
//   x = E[tokens];  for each layer:
//     x += LlamaAttention(RMSNorm_in(x))     RoPE, grouped-query, full KV
//     x += LlamaMlp(RMSNorm_post(x))         silu(gate) ⊙ up, down
//   logits = RMSNorm_f(x_last) · W_head^T
//
// Tensors: model.embed_tokens.weight [V, d],
// model.layers.{i}.input_layernorm.weight, .self_attn.{q,k,v,o}_proj.weight,
// .post_attention_layernorm.weight, .mlp.{gate,up,down}_proj.weight,
// model.norm.weight, lm_head.weight [V, d] (absent when tied).
// State per layer: FullKvState, 2 · T · H_kv · hd floats.
#ifndef TWICE_ENGINE_MODELS_LLAMA_MODEL_H_
#define TWICE_ENGINE_MODELS_LLAMA_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/config/llama_config.h"
#include "engine/models/stacked_model.h"

namespace twice::engine {

class LlamaModel final : public StackedModel {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(
      LlamaConfig config, WeightMap weights,
      std::unique_ptr<Tokenizer> tokenizer, std::string fingerprint);

  const LlamaConfig& config() const { return config_; }

 private:
  LlamaModel() = default;
  LlamaConfig config_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_LLAMA_MODEL_H_
