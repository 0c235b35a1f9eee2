// Generate: the decode loop of ONE sequence over a Model — prefill a prompt,
// then sample and step until max_tokens, the end-of-sequence token or a stop
// string. (DecodeLoop steps many sequences as one batch; both use
// SequenceDecoder, so they produce the same tokens.)
#ifndef TWICE_ENGINE_RUNTIME_GENERATOR_H_
#define TWICE_ENGINE_RUNTIME_GENERATOR_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/models/model.h"
#include "engine/runtime/sequence_decoder.h"

namespace twice::engine {

// `on_piece` returns false to cancel. `prompt` must hold at least one token
// (the logits of a state's last position are not stored with the state);
// an empty prompt is INVALID_ARGUMENT. The state ends holding the prompt and
// every generated token but the last.
[[nodiscard]] absl::StatusOr<GenerateResult> Generate(
    const Model& model, SequenceState& state, absl::Span<const int32_t> prompt,
    const GenerateOptions& options,
    const std::function<bool(const GeneratedPiece&)>& on_piece);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_RUNTIME_GENERATOR_H_
