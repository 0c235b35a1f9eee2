// NemotronHModel: NVIDIA Nemotron-H, a hybrid of Mamba-2, attention and MLP
// layers (transformers NemotronHForCausalLM), on the StackedModel driver.
// Every layer has one norm and one mixer, chosen by the config's
// hybrid_override_pattern:
//
//   x = E[tokens]                                 E [V, d], unscaled
//   for each layer l:  x += Mixer_l(RMSNorm_l(x))
//     M  Mamba2Mixer: G groups (head h reads group h / (H/G)), the SSM width
//        H·P, gated RMSNorm per group of H·P/G with layer_norm_epsilon
//     *  LlamaAttention without rotary (no positional encoding), GQA,
//        scale hd^-1/2, full KV cache
//     -  Relu2Mlp: down(relu(up(x))²), stateless
//   logits = RMSNorm_f(x_last) · W_head^T          untied unless configured
//
// Tensors (as published): backbone.embeddings.weight [V, d],
// backbone.layers.{i}.norm.weight [d], backbone.layers.{i}.mixer.* (the
// Mamba-2 names; q/k/v/o_proj; up/down_proj), backbone.norm_f.weight,
// lm_head.weight. The state per layer: Mamba2State (fixed size) for M,
// FullKvState (grows 2·H_kv·hd floats a token, stored as append-only
// blocks) for *, StatelessState for -. Prefix PrefillModes are
// UNIMPLEMENTED (no prefix encoder).
#ifndef TWICE_ENGINE_MODELS_NEMOTRON_H_MODEL_H_
#define TWICE_ENGINE_MODELS_NEMOTRON_H_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/config/nemotron_h_config.h"
#include "engine/models/stacked_model.h"

namespace twice::engine {

class NemotronHModel final : public StackedModel {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<NemotronHModel>> Create(
      NemotronHConfig config, WeightMap weights,
      std::unique_ptr<Tokenizer> tokenizer, std::string fingerprint);

  const NemotronHConfig& config() const { return config_; }

 private:
  NemotronHModel() = default;
  NemotronHConfig config_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_NEMOTRON_H_MODEL_H_
