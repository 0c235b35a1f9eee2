// Generate: the decode loop over a Model — prefill a prompt, then sample and
// step until max_tokens, the end-of-sequence token or a stop string.
#ifndef TWICE_ENGINE_RUNTIME_GENERATOR_H_
#define TWICE_ENGINE_RUNTIME_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/models/model.h"
#include "engine/sampling/sampler.h"

namespace twice::engine {

struct GenerateOptions {
  SamplingParams sampling;
  int32_t max_tokens = 64;        // Default 64. Must be >= 1.
  bool stop_at_eos = true;        // Default true.
  std::vector<std::string> stop;  // stop strings, not returned
};

// One streamed piece: new tokens and the text that became complete with them
// (UTF-8 is held back until a character is whole; stop strings are held back
// until they can no longer match).
struct GeneratedPiece {
  std::vector<int32_t> tokens;
  std::string text;
};

struct GenerateResult {
  int64_t tokens_prefilled = 0;
  int64_t tokens_decoded = 0;
  std::string finish_reason;  // "length", "eos", "stop", "cancelled"
};

// `on_piece` returns false to cancel. `prompt` must hold at least one token
// (the logits of a state's last position are not stored with the state);
// an empty prompt is INVALID_ARGUMENT.
[[nodiscard]] absl::StatusOr<GenerateResult> Generate(
    const Model& model, SequenceState& state, absl::Span<const int32_t> prompt,
    const GenerateOptions& options,
    const std::function<bool(const GeneratedPiece&)>& on_piece);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_RUNTIME_GENERATOR_H_
