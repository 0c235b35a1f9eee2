// StackedModel: the pre-norm residual stack every architecture runs on —
// Based and JRT-RNN, Mamba-2, RAT and the Llama baseline are each a config
// parser and a list of blocks over this one driver (architectures.h).
//
//   x = E[tokens] · s_e                           E [V, d]
//   for each block l:
//     x += s_r · Mixer_l(Norm1_l(x))   conv | linear attention | prefix
//                                   linear attention | window | SSD | RAT |
//                                   Llama | stateless MLP (Nemotron-H)
//     x += s_r · FeedForward_l(Norm2_l(x))   SwiGLU | GELU | none
//   logits = NormF(x_last) · W_head^T · s_l       W_head [V, d] (or E tied)
// The scales s_e, s_r, s_l are 1 except in Granite-4.0-H (its
// embedding_multiplier, residual_multiplier and 1 / logits_scaling).
//
// (RAT's "the layer adds its own residual" is the first line: its output
// projection plus the un-normalised input.) Prefill runs every block over a
// chunk of tokens at once; long inputs are cut into chunks, which exact
// state passing makes invisible in the results. A model with a prefix
// encoder (prefix_length M > 0, JRT-RNN) also reads the prefix
// PrefillModes: the whole encoder (M' tokens, pads included) goes into the
// first chunk, at whose end the encoder is merged into the linear-attention
// states, so the remaining chunks are ordinary causal reads; without one
// they are UNIMPLEMENTED. The state is one LayerState per block, owned by
// its mixer; a read validates it and then runs in place (state_checks.h).
#ifndef TWICE_ENGINE_MODELS_STACKED_MODEL_H_
#define TWICE_ENGINE_MODELS_STACKED_MODEL_H_

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/layers/feed_forward.h"
#include "engine/layers/mixer.h"
#include "engine/layers/rms_norm.h"
#include "engine/models/model.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

class StackedModel : public Model {
 public:
  struct Block {
    RmsNormLayer norm1;
    std::unique_ptr<Mixer> mixer;
    RmsNormLayer norm2;                // unused without ffn
    std::unique_ptr<FeedForward> ffn;  // nullptr: mixer-only block
  };

  const ModelDescription& description() const override { return description_; }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  std::unique_ptr<SequenceState> NewState() const override;

  [[nodiscard]] absl::StatusOr<std::vector<float>> Prefill(
      absl::Span<const int32_t> tokens, SequenceState& state,
      PrefillMode mode) const override;
  // The batch of one.
  [[nodiscard]] absl::StatusOr<std::vector<float>> Step(
      int32_t token, SequenceState& state) const override;
  // Norms, FFNs, mixer projections and the head run over the B rows at once
  // (one GEMM each, so B sequences share each pass over the weights); only
  // attention and recurrences are per sequence.
  [[nodiscard]] absl::StatusOr<std::vector<float>> StepBatch(
      absl::Span<const int32_t> tokens,
      absl::Span<SequenceState* const> states) const override;

  // The loaded layers, for an executor that keeps its own copy on a device
  // (engine/executor/resident_executor.h); valid while the model lives.
  const std::vector<Block>& blocks() const { return blocks_; }
  const Tensor& embedding() const { return embedding_; }
  // The embedding's buffer when tied.
  const Tensor& lm_head() const { return lm_head_; }
  const RmsNormLayer& final_norm() const { return final_norm_; }
  // A prefix read (JRT-RNN, PrefillMode): the tokens the model reads (left
  // pads, the tokens, again for Read-2x) and how its first rows encode.
  struct PrefixRead {
    std::vector<int32_t> input;
    PrefixEncoding encoding;
  };
  // UNIMPLEMENTED without a prefix encoder; INVALID_ARGUMENT for bad ids;
  // FAILED_PRECONDITION unless the state is empty (`state_tokens` == 0).
  [[nodiscard]] absl::StatusOr<PrefixRead> MakePrefixRead(
      absl::Span<const int32_t> tokens, PrefillMode mode,
      int64_t state_tokens) const;
  // Tokens the first pass of a prefix read takes: the encoder must fit in
  // it (every query sees the complete encoder sums).
  static int64_t FirstPrefixPass(const PrefixEncoding& prefix, int64_t chunk) {
    return std::max(chunk, prefix.encoder_tokens);
  }
  // Granite-4.0-H's multipliers (s_e, s_r, s_l above); 1 elsewhere.
  float embedding_scale() const { return embedding_scale_; }
  float residual_scale() const { return residual_scale_; }
  float logit_scale() const { return logit_scale_; }

 protected:
  // What a subclass's Create fills in before calling Finish.
  struct Parts {
    WeightMap weights;
    std::unique_ptr<Tokenizer> tokenizer;
    std::string architecture;
    std::string fingerprint;
    int64_t hidden_size = 0;
    int64_t vocab_rows = 0;  // rows of the embedding / logits width
    // The config's; -1: "</s>" or "<|endoftext|>" of the tokenizer, if any.
    int64_t eos_token_id = -1;
    int64_t training_context = 0;
    // Tokens per block-by-block prefill pass: bounds activation memory
    // without changing results.
    int64_t prefill_chunk = 512;
    // JRT-RNN's encoder length M and left-pad token (PrefillMode); 0: no
    // prefix encoder.
    int64_t prefix_length = 0;
    int64_t prefix_pad_token_id = -1;
    // Granite-4.0-H's multipliers (see the top); 1 elsewhere.
    float embedding_scale = 1.0f;
    float residual_scale = 1.0f;
    float logit_scale = 1.0f;
    Tensor embedding;  // [V, d]
    Tensor lm_head;    // [V, d]; the same buffer as `embedding` when tied
    std::vector<Block> blocks;
    RmsNormLayer final_norm;
  };

  StackedModel() = default;
  // Parts with what every architecture's config names alike (architecture,
  // width, EOS id, training context) and what the loader hands over; the
  // caller loads its layers from parts.weights and sets the rest.
  template <typename Config>
  static Parts PartsOf(const Config& config, int64_t vocab_rows,
                       WeightMap weights, std::unique_ptr<Tokenizer> tokenizer,
                       std::string fingerprint) {
    Parts p;
    p.weights = std::move(weights);
    p.tokenizer = std::move(tokenizer);
    p.architecture = config.architecture;
    p.fingerprint = std::move(fingerprint);
    p.hidden_size = config.hidden_size;
    p.vocab_rows = vocab_rows;
    p.eos_token_id = config.eos_token_id;
    p.training_context = config.training_context;
    return p;
  }
  // Fills parts.embedding and parts.lm_head ([vocab, d]) the way the Based
  // and Mamba-2 checkpoints store them: the embedding under
  // `embedding_name`, or under `head_name` when only that is stored (tied
  // checkpoints keep the matrix under either); tied, the head is the same
  // buffer and a stored head must have the shape; else the head is its
  // own tensor. Errors name the tensor.
  [[nodiscard]] static absl::Status LoadEmbeddingAndHead(
      const WeightMap& w, const std::string& embedding_name,
      const std::string& head_name, bool tied, const Shape& shape,
      Parts& parts);
  // Validates the vocabulary and takes ownership of the parts.
  [[nodiscard]] absl::Status Finish(Parts parts);

 private:
  [[nodiscard]] absl::StatusOr<std::vector<float>> PrefillPrefix(
      absl::Span<const int32_t> tokens, SequenceState& state,
      PrefillMode mode) const;
  // Reads `tokens` into `state` (validated) and writes the logits of the
  // last position; `prefix` for a prefix read from an empty state.
  [[nodiscard]] absl::Status Read(absl::Span<const int32_t> tokens,
                                  SequenceState& state,
                                  const PrefixEncoding* prefix,
                                  std::vector<float>& logits) const;
  [[nodiscard]] absl::Status ForwardChunk(absl::Span<const int32_t> tokens,
                                          SequenceState& state,
                                          const PrefixEncoding* prefix,
                                          std::vector<float>& x) const;
  // x = E[tokens] · s_e, [tokens, d].
  void Embed(absl::Span<const int32_t> tokens, std::vector<float>& x) const;
  // x += s_r · y over n floats.
  void AddResidual(std::vector<float>& x, const std::vector<float>& y,
                   int64_t n) const;
  // The head over `rows` normalised rows h, times s_l.
  [[nodiscard]] absl::Status Logits(absl::Span<const float> h, int64_t rows,
                                    absl::Span<float> logits) const;

  ModelDescription description_;
  WeightMap weights_;  // owns the mappings the tensors view
  std::unique_ptr<Tokenizer> tokenizer_;
  int64_t d_ = 0;
  int64_t prefill_chunk_ = 512;
  int64_t prefix_pad_token_id_ = -1;
  float embedding_scale_ = 1.0f;
  float residual_scale_ = 1.0f;
  float logit_scale_ = 1.0f;
  Tensor embedding_;
  Tensor lm_head_;
  std::vector<Block> blocks_;
  std::vector<const Mixer*> mixers_;  // blocks_[l].mixer, for state checks
  RmsNormLayer final_norm_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_STACKED_MODEL_H_
