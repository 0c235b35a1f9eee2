// SequenceDecoder: the per-sequence half of generation — sampling, stop
// rules and text streaming — kept apart from running the model, so that
// Generate (one sequence) and DecodeLoop (many sequences stepped as one
// batch) share exactly the same token-by-token behaviour.
//
// Text is streamed from the decoded bytes of all generated tokens; a piece
// carries only text that can no longer change: no byte of a UTF-8 character
// that the next token could complete, no suffix that could be the start of a
// stop string. An end-of-sequence token is neither returned nor counted.
//
// Not thread-safe: one owner at a time.
#ifndef TWICE_ENGINE_RUNTIME_SEQUENCE_DECODER_H_
#define TWICE_ENGINE_RUNTIME_SEQUENCE_DECODER_H_

#include <cstdint>
#include <memory>
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

// INVALID_ARGUMENT naming the first bad option.
[[nodiscard]] absl::Status ValidateGenerateOptions(
    const GenerateOptions& options);

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

// What one sampled token does to a sequence.
struct DecodeAdvance {
  // To stream; empty (no tokens, no text) when there is nothing new, which
  // only happens on an end-of-sequence token.
  GeneratedPiece piece;
  // No token follows; result() holds the finish reason.
  bool finished = false;
  // When not finished: the token to read into the state next, whose logits
  // feed the next Advance.
  int32_t next_token = -1;
};

class SequenceDecoder {
 public:
  // `model` must outlive the decoder; only its description and tokenizer
  // are used.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SequenceDecoder>> Create(
      const Model& model, GenerateOptions options);
  ~SequenceDecoder();

  // Samples the next token from the logits of the last position read (at
  // least vocab_size floats) and applies the stop rules.
  [[nodiscard]] absl::StatusOr<DecodeAdvance> Advance(
      absl::Span<const float> logits);
  // The same in two halves, for a caller that samples many sequences in one
  // kernels::SampleRows call: the rule of the next token, then the token
  // sampled with it (INTERNAL when outside the vocabulary).
  kernels::SamplingRule NextRule() const { return sampler_.NextRule(); }
  [[nodiscard]] absl::StatusOr<DecodeAdvance> Accept(int32_t token);
  // Ends the sequence early with finish reason "cancelled".
  void Cancel();

  bool finished() const { return finished_; }
  // tokens_decoded and finish_reason (tokens_prefilled is the caller's).
  const GenerateResult& result() const { return result_; }

 private:
  class TextStreamer;
  SequenceDecoder(const Model& model, GenerateOptions options);
  // The stop rules for a token the sampler has already counted.
  absl::StatusOr<DecodeAdvance> ApplyToken(int32_t token);

  const Model& model_;
  GenerateOptions options_;
  Sampler sampler_;
  std::unique_ptr<TextStreamer> streamer_;
  std::vector<int32_t> generated_;
  std::string text_;
  GenerateResult result_;
  bool finished_ = false;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_RUNTIME_SEQUENCE_DECODER_H_
