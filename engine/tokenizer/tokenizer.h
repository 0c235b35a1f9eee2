// Tokenizer: text <-> token ids, read from a HuggingFace `tokenizer.json`.
//
// Supported models: byte-level BPE as GPT-2 uses it (ByteLevel
// pre-tokenizer with the GPT-2 split pattern, byte-to-unicode alphabet, merge
// ranks) and WordLevel (whitespace split, unknown-token fallback).
//
// Thread safety: all const methods may be called concurrently.
// Failure: loading reports INVALID_ARGUMENT naming what is wrong in the file;
// Encode never fails on arbitrary bytes (invalid UTF-8 is encoded byte by
// byte for BPE, or as the unknown token for WordLevel); Decode fails with
// INVALID_ARGUMENT on an id outside the vocabulary.
#ifndef TWICE_ENGINE_TOKENIZER_TOKENIZER_H_
#define TWICE_ENGINE_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace twice::engine {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Parses the contents of a tokenizer.json.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(
      std::string_view json);
  // Reads and parses a tokenizer.json file.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(
      const std::string& path);

  [[nodiscard]] virtual absl::StatusOr<std::vector<int32_t>> Encode(
      std::string_view text) const = 0;
  // Returns the bytes the ids stand for. For byte-level BPE a prefix of a
  // token sequence may end inside a multi-byte UTF-8 character.
  [[nodiscard]] virtual absl::StatusOr<std::string> Decode(
      absl::Span<const int32_t> ids) const = 0;

  // Number of ids in the vocabulary (largest id + 1, added tokens included).
  virtual int32_t vocab_size() const = 0;
  // Id of a token string (vocabulary or added token), if it exists.
  virtual std::optional<int32_t> TokenToId(std::string_view token) const = 0;
  // "bpe" or "wordlevel".
  virtual std::string_view kind() const = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_TOKENIZER_TOKENIZER_H_
