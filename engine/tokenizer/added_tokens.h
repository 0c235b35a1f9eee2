// Added tokens (`added_tokens` in tokenizer.json, e.g. "<|endoftext|>"):
// exact strings that are cut out of the text before pre-tokenization and
// map to one id each. Matching is leftmost, longest first at a position.
// The lstrip/rstrip/single_word/normalized flags are not applied; the
// tokenizers we load (GPT-2 family, WordLevel tests) leave them off or they
// do not change the outcome for plain text.
#ifndef TWICE_ENGINE_TOKENIZER_ADDED_TOKENS_H_
#define TWICE_ENGINE_TOKENIZER_ADDED_TOKENS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace twice::engine {

struct AddedToken {
  std::string content;  // non-empty
  int32_t id = 0;
};

// A run of text between added tokens, or one added token.
struct TextSegment {
  std::string_view text;
  int32_t added_id = -1;  // -1: ordinary text to pre-tokenize
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // Tokens with empty content are ignored.
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  // Splits `text` into ordinary runs and added tokens, in order. Ordinary
  // runs are never empty.
  std::vector<TextSegment> Split(std::string_view text) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_TOKENIZER_ADDED_TOKENS_H_
