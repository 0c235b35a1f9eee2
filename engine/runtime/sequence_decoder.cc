#include "engine/runtime/sequence_decoder.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace twice::engine {

// Turns the growing decoded text into stream pieces.
class SequenceDecoder::TextStreamer {
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

absl::Status ValidateGenerateOptions(const GenerateOptions& options) {
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

SequenceDecoder::SequenceDecoder(const Model& model, GenerateOptions options)
    : model_(model),
      options_(std::move(options)),
      sampler_(options_.sampling),
      streamer_(std::make_unique<TextStreamer>(options_.stop)) {}

SequenceDecoder::~SequenceDecoder() = default;

absl::StatusOr<std::unique_ptr<SequenceDecoder>> SequenceDecoder::Create(
    const Model& model, GenerateOptions options) {
  if (absl::Status s = ValidateGenerateOptions(options); !s.ok()) return s;
  return std::unique_ptr<SequenceDecoder>(
      new SequenceDecoder(model, std::move(options)));
}

void SequenceDecoder::Cancel() {
  if (finished_) return;
  finished_ = true;
  result_.finish_reason = "cancelled";
}

absl::StatusOr<DecodeAdvance> SequenceDecoder::Advance(
    absl::Span<const float> logits) {
  if (finished_) {
    return absl::FailedPreconditionError("the sequence has finished");
  }
  const ModelDescription& desc = model_.description();
  if (logits.size() < static_cast<size_t>(std::max(desc.vocab_size, 1))) {
    return absl::InternalError(absl::StrCat("model returned ", logits.size(),
                                            " logits for a vocabulary of ",
                                            desc.vocab_size));
  }
  absl::StatusOr<int32_t> token = sampler_.Sample(logits, desc.vocab_size);
  if (!token.ok()) return token.status();
  return ApplyToken(*token);
}

absl::StatusOr<DecodeAdvance> SequenceDecoder::Accept(int32_t token) {
  if (finished_) {
    return absl::FailedPreconditionError("the sequence has finished");
  }
  const int32_t vocab_size = model_.description().vocab_size;
  if (token < 0 || token >= std::max(vocab_size, 1)) {
    return absl::InternalError(absl::StrCat(
        "sampled token ", token, " is outside the vocabulary of ", vocab_size));
  }
  sampler_.Advance();
  return ApplyToken(token);
}

absl::StatusOr<DecodeAdvance> SequenceDecoder::ApplyToken(int32_t token) {
  const ModelDescription& desc = model_.description();
  DecodeAdvance advance;
  if (options_.stop_at_eos && desc.eos_token_id >= 0 &&
      token == desc.eos_token_id) {
    result_.finish_reason = "eos";
    advance.piece.text = streamer_->Flush(text_);
    advance.finished = finished_ = true;
    return advance;
  }

  generated_.push_back(token);
  result_.tokens_decoded = static_cast<int64_t>(generated_.size());
  advance.piece.tokens.push_back(token);
  // Decoding everything, not just the new token, keeps tokenizers whose
  // decode is not a concatenation (WordLevel joins with spaces) right; it
  // costs a copy of the text per token, small next to a model step.
  absl::StatusOr<std::string> decoded = model_.tokenizer().Decode(generated_);
  if (!decoded.ok()) return decoded.status();
  text_ = *std::move(decoded);

  bool stopped = false;
  advance.piece.text = streamer_->Advance(text_, stopped);
  const bool last =
      stopped || static_cast<int64_t>(generated_.size()) >= options_.max_tokens;
  if (stopped) {
    result_.finish_reason = "stop";
  } else if (last) {
    result_.finish_reason = "length";
    advance.piece.text += streamer_->Flush(text_);
  }
  advance.finished = finished_ = last;
  // The last token is never read into the state: nothing would use its
  // logits.
  if (!last) advance.next_token = token;
  return advance;
}

}  // namespace twice::engine
