// The decode loop. Text is streamed from the decoded bytes of all generated
// tokens; a piece carries only text that can no longer change:
//   - no byte of a UTF-8 character that the next token could complete;
//   - no suffix that could be the start of a stop string.
// The state ends holding the prompt and every generated token but the last:
// the last one is never stepped, since nothing would read its logits. An
// end-of-sequence token is neither returned nor counted in tokens_decoded.
#include "engine/runtime/generator.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace twice::engine {
namespace {

absl::Status ValidateOptions(const GenerateOptions& options) {
  if (absl::Status s = options.sampling.Validate(); !s.ok()) return s;
  if (options.max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens must be >= 1, got ", options.max_tokens));
  }
  for (const std::string& stop : options.stop) {
    if (stop.empty()) {
      return absl::InvalidArgumentError("stop strings must not be empty");
    }
  }
  return absl::OkStatus();
}

// Turns the growing decoded text into stream pieces.
class TextStreamer {
 public:
  explicit TextStreamer(const std::vector<std::string>& stops)
      : stops_(stops) {}

  // Takes the decoded text of all tokens so far (each call extends the
  // previous one) and returns the text that became final. Sets `stopped`
  // once a stop string appears; the text before it is then final and
  // everything from it on is dropped.
  std::string Advance(std::string_view text, bool& stopped) {
    const std::string_view pending =
        text.substr(std::min(emitted_, text.size()));
    if (std::optional<size_t> at = FindStop(pending); at.has_value()) {
      stopped = true;
      return Take(pending, *at);
    }
    const size_t held =
        std::max(StopPrefixLength(pending),
                 pending.size() - CompleteUtf8PrefixLength(pending));
    // Never cut inside a character, whichever rule chose the cut.
    return Take(pending,
                Utf8BoundaryAtOrBefore(pending, pending.size() - held));
  }

  // Everything not yet emitted, once no token will follow.
  std::string Flush(std::string_view text) {
    const std::string_view pending =
        text.substr(std::min(emitted_, text.size()));
    return Take(pending, pending.size());
  }

 private:
  std::string Take(std::string_view pending, size_t length) {
    emitted_ += length;
    return std::string(pending.substr(0, length));
  }

  // Earliest start of any stop string in `pending`. Occurrences cannot
  // start in emitted text: a suffix that could begin one is always held.
  std::optional<size_t> FindStop(std::string_view pending) const {
    std::optional<size_t> earliest;
    for (const std::string& stop : stops_) {
      const size_t at = pending.find(stop);
      if (at != std::string_view::npos && (!earliest || at < *earliest)) {
        earliest = at;
      }
    }
    return earliest;
  }

  // Length of the longest suffix of `pending` that is a proper prefix of a
  // stop string, i.e. could still grow into one.
  size_t StopPrefixLength(std::string_view pending) const {
    size_t longest = 0;
    for (const std::string& stop : stops_) {
      const size_t max_len = std::min(stop.size() - 1, pending.size());
      for (size_t len = max_len; len > longest; --len) {
        if (pending.substr(pending.size() - len) ==
            std::string_view(stop).substr(0, len)) {
          longest = len;
          break;
        }
      }
    }
    return longest;
  }

  const std::vector<std::string>& stops_;
  size_t emitted_ = 0;
};

}  // namespace

absl::StatusOr<GenerateResult> Generate(
    const Model& model, SequenceState& state, absl::Span<const int32_t> prompt,
    const GenerateOptions& options,
    const std::function<bool(const GeneratedPiece&)>& on_piece) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  if (prompt.empty()) {
    return absl::InvalidArgumentError("prompt must hold at least one token");
  }
  const ModelDescription& desc = model.description();
  const Tokenizer& tokenizer = model.tokenizer();

  absl::StatusOr<std::vector<float>> logits =
      model.Prefill(prompt, state, PrefillMode::kCausal);
  if (!logits.ok()) return logits.status();

  GenerateResult result;
  result.tokens_prefilled = static_cast<int64_t>(prompt.size());
  Sampler sampler(options.sampling);
  TextStreamer streamer(options.stop);
  std::vector<int32_t> generated;
  std::string text;

  while (true) {
    if (logits->size() < static_cast<size_t>(std::max(desc.vocab_size, 1))) {
      return absl::InternalError(absl::StrCat("model returned ", logits->size(),
                                              " logits for a vocabulary of ",
                                              desc.vocab_size));
    }
    const int32_t token = sampler.Sample(*logits, desc.vocab_size);

    GeneratedPiece piece;
    if (options.stop_at_eos && desc.eos_token_id >= 0 &&
        token == desc.eos_token_id) {
      result.finish_reason = "eos";
      piece.text = streamer.Flush(text);
      if (!piece.text.empty()) on_piece(piece);
      break;
    }

    generated.push_back(token);
    result.tokens_decoded = static_cast<int64_t>(generated.size());
    piece.tokens.push_back(token);
    // Decoding everything, not just the new token, keeps tokenizers whose
    // decode is not a concatenation (WordLevel joins with spaces) right; it
    // costs a copy of the text per token, small next to a model step.
    absl::StatusOr<std::string> decoded = tokenizer.Decode(generated);
    if (!decoded.ok()) return decoded.status();
    text = *std::move(decoded);

    bool stopped = false;
    piece.text = streamer.Advance(text, stopped);
    const bool last =
        stopped || static_cast<int64_t>(generated.size()) >= options.max_tokens;
    if (stopped) {
      result.finish_reason = "stop";
    } else if (last) {
      result.finish_reason = "length";
      piece.text += streamer.Flush(text);
    }
    // A false return on the final piece changes nothing: generation was
    // over anyway, and its reason is the more useful answer.
    if (!on_piece(piece) && !last) {
      result.finish_reason = "cancelled";
      break;
    }
    if (last) break;

    logits = model.Step(token, state);
    if (!logits.ok()) return logits.status();
  }
  return result;
}

}  // namespace twice::engine
