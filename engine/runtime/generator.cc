#include "engine/runtime/generator.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace twice::engine {

absl::StatusOr<GenerateResult> Generate(
    const Model& model, SequenceState& state, absl::Span<const int32_t> prompt,
    const GenerateOptions& options,
    const std::function<bool(const GeneratedPiece&)>& on_piece) {
  absl::StatusOr<std::unique_ptr<SequenceDecoder>> decoder =
      SequenceDecoder::Create(model, options);
  if (!decoder.ok()) return decoder.status();
  if (prompt.empty()) {
    return absl::InvalidArgumentError("prompt must hold at least one token");
  }
  absl::StatusOr<std::vector<float>> logits =
      model.Prefill(prompt, state, PrefillMode::kCausal);
  if (!logits.ok()) return logits.status();

  while (true) {
    absl::StatusOr<DecodeAdvance> advance = (*decoder)->Advance(*logits);
    if (!advance.ok()) return advance.status();
    const GeneratedPiece& piece = advance->piece;
    // A false return on the final piece changes nothing: generation was
    // over anyway, and its reason is the more useful answer.
    const bool delivered =
        piece.tokens.empty() && piece.text.empty() ? true : on_piece(piece);
    if (advance->finished) break;
    if (!delivered) {
      (*decoder)->Cancel();
      break;
    }
    logits = model.Step(advance->next_token, state);
    if (!logits.ok()) return logits.status();
  }
  GenerateResult result = (*decoder)->result();
  result.tokens_prefilled = static_cast<int64_t>(prompt.size());
  return result;
}

}  // namespace twice::engine
