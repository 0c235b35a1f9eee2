// Mamba2Model: a Mamba-2 language model (Dao & Gu 2024, state-spaces/mamba
// `MambaLMHeadModel` with Mamba2 mixers and no MLP): mixer-only blocks of
// the StackedModel driver.
//
//   x = E[tokens]                                  E [V_pad, D]
//   for each layer l (pre-norm, f32 residual):
//     x += Mamba2Mixer_l(RMSNorm_l(x))
//   logits = RMSNorm_f(x_last) · E^T               (tied head, [V_pad])
// RMSNorm: x · w / sqrt(mean(x²) + norm_epsilon), no bias.
//
// Tensors (upstream names): backbone.embedding.weight,
// backbone.layers.{i}.norm.weight, backbone.layers.{i}.mixer.*,
// backbone.norm_f.weight, lm_head.weight (optional when tied; checked when
// present). The transformers spelling (backbone.embeddings.weight) and
// names without the backbone. prefix are canonicalised at load
// (Mamba2WeightName).
//
// The state holds one Mamba2State per layer (conv window + SSM state), of
// fixed size. Prefill runs every layer over up to 2048 tokens at once in the
// chunked SSD form, starting from the carried state; Step / StepBatch run
// the recurrent form. Prefix PrefillModes are UNIMPLEMENTED: Mamba-2 has no
// prefix encoder.
#ifndef TWICE_ENGINE_MODELS_MAMBA2_MODEL_H_
#define TWICE_ENGINE_MODELS_MAMBA2_MODEL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/config/mamba2_config.h"
#include "engine/layers/mamba2_mixer.h"
#include "engine/models/stacked_model.h"

namespace twice::engine {

// Canonical name of a stored Mamba-2 tensor: drops a leading "model.",
// renames transformers' "embeddings." to "embedding." and puts everything
// but lm_head under "backbone.".
std::string Mamba2WeightName(std::string_view stored);

// The mixer dimensions a Mamba-2 config gives (E = expand · D).
Mamba2MixerOptions Mamba2MixerOptionsOf(const Mamba2Config& config);

class Mamba2Model final : public StackedModel {
 public:
  // Builds the model from parsed parts; `fingerprint` identifies them.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Mamba2Model>> Create(
      Mamba2Config config, WeightMap weights,
      std::unique_ptr<Tokenizer> tokenizer, std::string fingerprint);

  const Mamba2Config& config() const { return config_; }
  // Bytes of f32 payload one sequence's state holds:
  // layers · ((K-1)·(E + 2GN) + H·P·N) · 4, independent of its length.
  int64_t StatePayloadBytes() const { return state_payload_bytes_; }

 private:
  Mamba2Model() = default;
  Mamba2Config config_;
  int64_t state_payload_bytes_ = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_MAMBA2_MODEL_H_
