// BasedModel: the Based architecture (Arora et al. 2024), and
// JRT-RNN (Arora et al. 2024, "Just read twice"), which is Based with prefix
// linear attention in place of linear attention (config architecture "jrt").
//
//   x = E[tokens]                                  E [V_pad, d]
//   for each layer l (pre-norm, f32 residual):
//     x += Mixer_l(RMSNorm1_l(x))   BaseConv | BasedLinearAttention |
//                                   PrefixLinearAttention (jrt) |
//                                   SlidingWindowAttention (by config)
//     x += SwiGluMlp_l(RMSNorm2_l(x))
//   logits = RMSNorm_f(x_last) · E^T               (tied head, [V_pad])
//
// Tensors: transformer.embeddings.word_embeddings.weight,
// transformer.layers.{i}.norm1.weight / norm2.weight / mixer.* / mlp.*,
// transformer.ln_f.weight, lm_head.weight (optional when tied; its shape is
// checked when present).
//
// The state holds one LayerState per layer (conv tail, linear-attention
// S / z, or window ring). The driver, prefix reads (jrt) included, is
// StackedModel's.
#ifndef TWICE_ENGINE_MODELS_BASED_MODEL_H_
#define TWICE_ENGINE_MODELS_BASED_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/config/based_config.h"
#include "engine/models/stacked_model.h"

namespace twice::engine {

class BasedModel final : public StackedModel {
 public:
  // Builds the model from parsed parts; `fingerprint` identifies them.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<BasedModel>> Create(
      BasedConfig config, WeightMap weights,
      std::unique_ptr<Tokenizer> tokenizer, std::string fingerprint);

  const BasedConfig& config() const { return config_; }

 private:
  BasedModel() = default;
  BasedConfig config_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_BASED_MODEL_H_
