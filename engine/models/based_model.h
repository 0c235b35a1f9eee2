// BasedModel: the Based architecture (Arora et al. 2024) on CPU in f32, and
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
// S / z, or window ring). Prefill runs every layer over a chunk of tokens at
// once; long inputs are cut into chunks, which state passing makes exact.
// A prefix prefill (jrt) puts the whole encoder (M' tokens, pads included) in
// its first chunk; at the end of that chunk the encoder is merged into the
// linear-attention states, so the remaining chunks are ordinary causal reads.
#ifndef TWICE_ENGINE_MODELS_BASED_MODEL_H_
#define TWICE_ENGINE_MODELS_BASED_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/config/based_config.h"
#include "engine/layers/mixer.h"
#include "engine/layers/rms_norm.h"
#include "engine/layers/swiglu_mlp.h"
#include "engine/models/model.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

class BasedModel final : public Model {
 public:
  // Builds the model from parsed parts; `fingerprint` identifies them.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<BasedModel>> Create(
      BasedConfig config, WeightMap weights,
      std::unique_ptr<Tokenizer> tokenizer, std::string fingerprint);

  const ModelDescription& description() const override { return description_; }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  std::unique_ptr<SequenceState> NewState() const override;

  [[nodiscard]] absl::StatusOr<std::vector<float>> Prefill(
      absl::Span<const int32_t> tokens, SequenceState& state,
      PrefillMode mode) const override;
  // The batch of one.
  [[nodiscard]] absl::StatusOr<std::vector<float>> Step(
      int32_t token, SequenceState& state) const override;
  // Every layer's norms, MLP, mixer projections and the head run over the B
  // rows at once; only the mixers' recurrences are per sequence.
  [[nodiscard]] absl::StatusOr<std::vector<float>> StepBatch(
      absl::Span<const int32_t> tokens,
      absl::Span<SequenceState* const> states) const override;

  const BasedConfig& config() const { return config_; }

 private:
  struct Block {
    RmsNormLayer norm1;
    std::unique_ptr<Mixer> mixer;
    RmsNormLayer norm2;
    SwiGluMlp mlp;
  };

  BasedModel() = default;

  [[nodiscard]] absl::Status CheckTokens(
      absl::Span<const int32_t> tokens) const;
  [[nodiscard]] absl::Status CheckState(SequenceState& state) const;
  // Runs `tokens` through every layer, advancing `state`; writes the logits
  // of the last token. With `prefix`, `state` is empty and the tokens are a
  // prefix read (pads included).
  [[nodiscard]] absl::Status Forward(absl::Span<const int32_t> tokens,
                                     SequenceState& state,
                                     std::vector<float>& logits,
                                     const PrefixEncoding* prefix) const;
  [[nodiscard]] absl::Status ForwardChunk(absl::Span<const int32_t> tokens,
                                          SequenceState& state,
                                          std::vector<float>& x,
                                          const PrefixEncoding* prefix) const;
  // A prefix-mode Prefill: validation, the padding rule, then Forward.
  [[nodiscard]] absl::StatusOr<std::vector<float>> PrefillPrefix(
      absl::Span<const int32_t> tokens, SequenceState& state,
      PrefillMode mode) const;
  [[nodiscard]] absl::StatusOr<std::vector<float>> Run(
      absl::Span<const int32_t> tokens, SequenceState& state) const;

  BasedConfig config_;
  WeightMap weights_;  // owns the mappings the tensors below view
  std::unique_ptr<Tokenizer> tokenizer_;
  ModelDescription description_;
  Tensor embedding_;  // [V_pad, d]
  Tensor lm_head_;    // [V_pad, d]
  std::vector<Block> blocks_;
  std::vector<const Mixer*> mixers_;  // blocks_[l].mixer, for state checks
  RmsNormLayer final_norm_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_BASED_MODEL_H_
