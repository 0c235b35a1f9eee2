// Mamba2Model: a Mamba-2 language model (Dao & Gu 2024, state-spaces/mamba
// `MambaLMHeadModel` with Mamba2 mixers and no MLP) on CPU in f32.
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
// fixed size. Prefill runs every layer over up to kPrefillChunk tokens at
// once in the chunked SSD form, starting from the carried state; Step /
// StepBatch run the recurrent form. Prefix PrefillModes are UNIMPLEMENTED:
// Mamba-2 has no prefix encoder.
#ifndef TWICE_ENGINE_MODELS_MAMBA2_MODEL_H_
#define TWICE_ENGINE_MODELS_MAMBA2_MODEL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/config/mamba2_config.h"
#include "engine/layers/mamba2_mixer.h"
#include "engine/layers/rms_norm.h"
#include "engine/models/model.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

// Canonical name of a stored Mamba-2 tensor: drops a leading "model.",
// renames transformers' "embeddings." to "embedding." and puts everything
// but lm_head under "backbone.".
std::string Mamba2WeightName(std::string_view stored);

class Mamba2Model final : public Model {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Mamba2Model>> Create(
      Mamba2Config config, WeightMap weights,
      std::unique_ptr<Tokenizer> tokenizer, std::string fingerprint);

  const ModelDescription& description() const override { return description_; }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  std::unique_ptr<SequenceState> NewState() const override;

  [[nodiscard]] absl::StatusOr<std::vector<float>> Prefill(
      absl::Span<const int32_t> tokens, SequenceState& state,
      PrefillMode mode) const override;
  // The batch of one (recurrent form).
  [[nodiscard]] absl::StatusOr<std::vector<float>> Step(
      int32_t token, SequenceState& state) const override;
  // Norms, projections and the head run over the B rows at once; conv and
  // SSD steps per sequence.
  [[nodiscard]] absl::StatusOr<std::vector<float>> StepBatch(
      absl::Span<const int32_t> tokens,
      absl::Span<SequenceState* const> states) const override;

  const Mamba2Config& config() const { return config_; }
  // Bytes of f32 payload one sequence's state holds:
  // layers · ((K-1)·(E + 2GN) + H·P·N) · 4, independent of its length.
  int64_t StatePayloadBytes() const;

 private:
  struct Block {
    RmsNormLayer norm;
    std::unique_ptr<Mamba2Mixer> mixer;
  };

  Mamba2Model() = default;

  [[nodiscard]] absl::Status CheckTokens(
      absl::Span<const int32_t> tokens) const;
  [[nodiscard]] absl::Status CheckState(SequenceState& state) const;
  [[nodiscard]] absl::Status ForwardChunk(absl::Span<const int32_t> tokens,
                                          SequenceState& state,
                                          std::vector<float>& x) const;
  [[nodiscard]] absl::Status Head(absl::Span<const float> x, int64_t rows,
                                  std::vector<float>& logits) const;

  Mamba2Config config_;
  WeightMap weights_;  // owns the mappings the tensors below view
  std::unique_ptr<Tokenizer> tokenizer_;
  ModelDescription description_;
  Tensor embedding_;  // [V_pad, D]
  Tensor lm_head_;    // [V_pad, D]
  std::vector<Block> blocks_;
  std::vector<const Mixer*> mixers_;  // blocks_[l].mixer, for state checks
  RmsNormLayer final_norm_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_MAMBA2_MODEL_H_
