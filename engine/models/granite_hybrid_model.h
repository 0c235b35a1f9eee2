// GraniteHybridModel: IBM Granite-4.0-H (transformers
// GraniteMoeHybridForCausalLM), dense or with experts, on the StackedModel
// driver. Every layer is a Mamba-2 or an attention mixer followed by the
// shared SwiGLU MLP (plus, with experts, the routed ones: TopKMoeMlp),
// both residuals scaled:
//
//   x = E[tokens] · embedding_multiplier
//   for each layer l:
//     x += residual_multiplier · Mixer_l(RMSNorm_in(x))
//          mamba      Mamba2Mixer: E = mamba_expand · d = H·P, G groups,
//                     gated RMSNorm per group with rms_norm_eps
//          attention  LlamaAttention without positional encoding (NoPE),
//                     GQA, softmax scale attention_multiplier (not hd^-1/2)
//     x += residual_multiplier · FusedSwiGluMlp(RMSNorm_post(x))
//          with experts: TopKMoeMlp (the shared MLP + the top-k experts)
//   logits = RMSNorm_f(x_last) · W_head^T / logits_scaling   (tied default)
//
// Tensors (as published): model.embed_tokens.weight, model.norm.weight,
// lm_head.weight (tied: optional), model.layers.{i}.input_layernorm.weight,
// .post_attention_layernorm.weight, .mamba.* (the Mamba-2 names) or
// .self_attn.{q,k,v,o}_proj.weight, .shared_mlp.input_linear.weight
// [2I, d] (gate rows first), .shared_mlp.output_linear.weight [d, I], and
// with experts .block_sparse_moe.router.layer.weight [E, d],
// .block_sparse_moe.input_linear.weight [E, 2I_e, d] and
// .block_sparse_moe.output_linear.weight [E, d, I_e].
// State per layer: Mamba2State (fixed) or FullKvState (grows, append-only
// blocks). Prefix PrefillModes are UNIMPLEMENTED.
#ifndef TWICE_ENGINE_MODELS_GRANITE_HYBRID_MODEL_H_
#define TWICE_ENGINE_MODELS_GRANITE_HYBRID_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/config/granite_hybrid_config.h"
#include "engine/models/stacked_model.h"

namespace twice::engine {

class GraniteHybridModel final : public StackedModel {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<GraniteHybridModel>>
  Create(GraniteHybridConfig config, WeightMap weights,
         std::unique_ptr<Tokenizer> tokenizer, std::string fingerprint);

  const GraniteHybridConfig& config() const { return config_; }

 private:
  GraniteHybridModel() = default;
  GraniteHybridConfig config_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_GRANITE_HYBRID_MODEL_H_
