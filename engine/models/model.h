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
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/state/sequence_state.h"
#include "engine/tokenizer/tokenizer.h"

namespace twice::engine {

enum class PrefillMode { kCausal, kPrefix };

struct ModelDescription {
  std::string architecture;  // "based"
  std::string fingerprint;   // hex SHA-256 (design §3)
  int32_t vocab_size = 0;    // ids the model accepts (tokenizer vocabulary)
  int32_t padded_vocab_size = 0;  // rows of the embedding / logits width
  int32_t eos_token_id = -1;      // -1 when the model has none
  int64_t training_context = 0;   // default ingest segment size
  int num_layers = 0;
  int hidden_size = 0;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelDescription& description() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;

  // A fresh empty state (zero tokens read) bound to this model.
  virtual std::unique_ptr<SequenceState> NewState() const = 0;

  // Reads `tokens` (at least one) after whatever `state` holds and returns
  // the logits of the last position (padded_vocab_size floats). On error the
  // state is left unchanged.
  [[nodiscard]] virtual absl::StatusOr<std::vector<float>> Prefill(
      absl::Span<const int32_t> tokens, SequenceState& state,
      PrefillMode mode) const = 0;
  // Reads one token; returns its logits.
  [[nodiscard]] virtual absl::StatusOr<std::vector<float>> Step(
      int32_t token, SequenceState& state) const = 0;
};

// Loads config.json, *.safetensors and tokenizer.json from `dir`. Errors name
// the file and, for weights, the tensor that is missing or mis-shaped.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Model>> LoadModel(
    const std::string& dir);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_MODEL_H_
