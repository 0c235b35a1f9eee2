// WordLevel: text is cut at added tokens, split into words, and each word
// maps to its id or, if it is not in the vocabulary, to the unknown token.
// Decoding joins the tokens with single spaces, so a round trip gives the
// words back with their whitespace normalized.
#ifndef TWICE_ENGINE_TOKENIZER_WORD_LEVEL_TOKENIZER_H_
#define TWICE_ENGINE_TOKENIZER_WORD_LEVEL_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocabulary.h"

namespace twice::engine {

enum class WordSplit {
  // HuggingFace "WhitespaceSplit": words are maximal runs of non-space.
  kWhitespace,
  // HuggingFace "Whitespace": runs of word characters (\w: letters, marks,
  // digits, connector punctuation) or of other non-space characters,
  // i.e. \w+|[^\w\s]+.
  kWordsAndPunctuation,
};

struct WordLevelOptions {
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::string unk_token;  // must be in `vocab` or `added_tokens`
  std::vector<AddedToken> added_tokens;
  WordSplit split = WordSplit::kWhitespace;  // Default: WhitespaceSplit.
};

class WordLevelTokenizer final : public Tokenizer {
 public:
  // INVALID_ARGUMENT when the unknown token is not in the vocabulary.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<WordLevelTokenizer>>
  Create(WordLevelOptions options);

  absl::StatusOr<std::vector<int32_t>> Encode(
      std::string_view text) const override;
  absl::StatusOr<std::string> Decode(
      absl::Span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return vocab_.size(); }
  std::optional<int32_t> TokenToId(std::string_view token) const override {
    return vocab_.Find(token);
  }
  std::string_view kind() const override { return "wordlevel"; }

 private:
  explicit WordLevelTokenizer(Vocabulary vocab) : vocab_(std::move(vocab)) {}

  Vocabulary vocab_;
  AddedTokenMatcher added_;
  int32_t unk_id_ = 0;
  WordSplit split_ = WordSplit::kWhitespace;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_TOKENIZER_WORD_LEVEL_TOKENIZER_H_
