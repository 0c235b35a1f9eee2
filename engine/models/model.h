// Model: a loaded language model that reads tokens into a SequenceState and
// produces next-token logits.
//
// Thread safety: weights are immutable after loading, so every const method
// may run concurrently on different states. A state must not be shared.
// Failure: token ids outside [0, vocab_size) are INVALID_ARGUMENT; a state of
// another model is FAILED_PRECONDITION. Nothing aborts on bad input.
#ifndef TWICE_ENGINE_MODELS_MODEL_H_
#define TWICE_ENGINE_MODELS_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/state/sequence_state.h"
#include "engine/tensor/tensor.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/sampling.h"

namespace twice::engine {

// How Prefill reads its tokens. The prefix modes need a model with a prefix
// encoder (ModelDescription::prefix_length > 0, JRT-RNN) and an EMPTY state:
// the first M' = min(M, N) tokens of the read are encoded non-causally and
// merged into the recurrent state at its end, so they cannot be applied to a
// state that already holds tokens. After a prefix read, Step and causal
// Prefill continue as in any model.
enum class PrefillMode {
  // Ordinary left-to-right read.
  kCausal,
  // JRT-RNN default inference protocol: a read of N < M tokens is left-padded
  // to exactly M with the model's pad token (GPT-2 " ", 220) and the pads are
  // masked in the prefix linear-attention layers (only there: the other
  // layers read them as ordinary tokens at positions 0..M-N-1). The state's
  // token_count then includes the pads (it is M). N >= M: no padding; the
  // encoder is the first M tokens, the rest enter causally only.
  kPrefix,
  // Read-2x: the tokens are read twice (tokens + tokens), so the document
  // itself fills the encoder instead of pads; the result is then padded by
  // the kPrefix rule if still shorter than M. Equals kPrefix on the repeated
  // tokens.
  kPrefixReadTwice,
  // No padding: for N < M the whole read is the encoder (M' = N), as
  // upstream's generate() without its left-pad mode.
  kPrefixUnpadded,
};

inline bool IsPrefixMode(PrefillMode mode) {
  return mode != PrefillMode::kCausal;
}

struct ModelDescription {
  std::string architecture;  // "based", "jrt", "mamba2", "llama", "rat",
                             // "nemotron_h", "granitemoehybrid"
  std::string fingerprint;   // hex SHA-256 (design §3)
  int32_t vocab_size = 0;    // ids the model accepts (tokenizer vocabulary)
  int32_t padded_vocab_size = 0;  // rows of the embedding / logits width
  int32_t eos_token_id = -1;      // -1 when the model has none
  int64_t training_context = 0;   // default ingest segment size
  int num_layers = 0;
  int hidden_size = 0;
  // JRT encoder length M: the model supports the prefix PrefillModes when it
  // is > 0. 0 for models without a prefix encoder (Based).
  int64_t prefix_length = 0;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelDescription& description() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;

  // A fresh empty state (zero tokens read) bound to this model.
  virtual std::unique_ptr<SequenceState> NewState() const = 0;

  // Reads `tokens` (at least one) after whatever `state` holds and returns
  // the logits of the last position (padded_vocab_size floats). Invalid
  // input (ids, a state of another model or of the wrong shape) is refused
  // with the state unchanged; the read then runs in place, and a failure
  // after that (a device fault) leaves the state marked damaged
  // (state_checks.h). A prefix mode is UNIMPLEMENTED on a model
  // without a prefix encoder and FAILED_PRECONDITION on a state that holds
  // tokens (see PrefillMode).
  [[nodiscard]] virtual absl::StatusOr<std::vector<float>> Prefill(
      absl::Span<const int32_t> tokens, SequenceState& state,
      PrefillMode mode) const = 0;
  // Reads one token; returns its logits.
  [[nodiscard]] virtual absl::StatusOr<std::vector<float>> Step(
      int32_t token, SequenceState& state) const = 0;

  // Reads tokens[b] into *states[b] for every b (B = tokens.size() distinct
  // states, B >= 1) and returns the B rows of logits ([B, padded_vocab_size]
  // row-major). Equal to B calls of Step up to float summation order; a
  // model overrides it so that the B sequences share each pass over the
  // weights (one GEMM with m = B per projection): this is what lets a decode
  // loop serve concurrent sequences for about the cost of one. Invalid
  // input changes no state (as Prefill). The default calls Step per row.
  [[nodiscard]] virtual absl::StatusOr<std::vector<float>> StepBatch(
      absl::Span<const int32_t> tokens,
      absl::Span<SequenceState* const> states) const;
  // StepBatch, then the token rules[b] picks from row b's logits
  // (kernels/sampling.h, the first vocab_size of them): the decode loop's
  // step. The default samples StepBatch's logits on the host; a model
  // whose logits stay on a device samples there, so only the B ids come
  // back. INVALID_ARGUMENT for a bad rule, with every state unchanged.
  [[nodiscard]] virtual absl::StatusOr<std::vector<int32_t>> StepBatchSampled(
      absl::Span<const int32_t> tokens, absl::Span<SequenceState* const> states,
      absl::Span<const kernels::SamplingRule> rules) const;
};

// INVALID_ARGUMENT unless tokens and states have the same size >= 1 and the
// states are distinct and non-null (for StepBatch implementations).
[[nodiscard]] absl::Status CheckStepBatchShape(
    absl::Span<const int32_t> tokens, absl::Span<SequenceState* const> states);

struct LoadOptions {
  // The dtype projection and embedding matrices are kept in
  // (--weights_dtype): nullopt ("auto") keeps each as stored, memory
  // mapped; otherwise they are converted once at load (I8: one scale per
  // block of 64 weights of a row, kernels/dtype.h). Norms, biases and other
  // small tensors are f32 either way, as are activations and states. Part
  // of the fingerprint when it converts anything (fingerprint.h).
  std::optional<DType> weights_dtype;
  // Serve the model from a resident executor (engine/executor/
  // resident_model.h: weights, workspace and sequence states kept on
  // `resident_device`, "cpu" or "cuda") when its layers have resident forms
  // (every shipped architecture: Mamba-2, Based, JRT-RNN, Llama,
  // Nemotron-H, RAT, Granite-4.0-H); a model with a layer that has none
  // loads as usual.
  // `resident_slots` states are resident at once (--resident_slots);
  // full-attention layers keep `resident_kv_tokens` tokens of KV cache for
  // all of them together (--resident_kv_tokens); `resident_step_graphs`
  // records decode steps as device graphs (--resident_step_graphs,
  // engine/executor/step_graphs.h); a prefill runs in passes of
  // `resident_prefill_chunk` tokens (--resident_prefill_chunk; 0: 512 on
  // the CPU, 4096 on a GPU).
  bool resident = false;
  std::string resident_device = "cpu";
  int32_t resident_slots = 256;
  int64_t resident_kv_tokens = 65536;
  bool resident_step_graphs = true;
  int64_t resident_prefill_chunk = 0;
  // Concurrent reads of at most one pass share prefill passes
  // (--resident_share_prefill_passes, engine/executor/prefill_batcher.h).
  bool resident_share_prefill_passes = true;
};

// The --weights_dtype flag: "auto" (nullopt), "f32", "bf16", "f16" or
// "int8"; INVALID_ARGUMENT listing them otherwise.
[[nodiscard]] absl::StatusOr<std::optional<DType>> ParseWeightsDType(
    std::string_view flag);
// "auto" for nullopt, else DTypeFlagName.
std::string WeightsDTypeName(std::optional<DType> dtype);

// The prefill pass length a resident load of `options` runs with: its
// resident_prefill_chunk, or when that is 0 the device's default (512 on
// the CPU, 4096 on CUDA: engine/executor/resident_executor.h).
int64_t ResidentPrefillChunk(const LoadOptions& options);

// Loads config.json, *.safetensors and tokenizer.json from `dir` as the
// architecture its config names (architectures.h). Errors name the file
// and, for weights, the tensor that is missing or mis-shaped; a negative
// resident_prefill_chunk is INVALID_ARGUMENT.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Model>> LoadModel(
    const std::string& dir, const LoadOptions& options = {});

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_MODEL_H_
