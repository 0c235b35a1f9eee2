#include "engine/tokenizer/word_level_tokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"
#include "unicode/uchar.h"

namespace twice::engine {
namespace {

enum class CharKind { kSpace, kWord, kOther };

// Invalid UTF-8 bytes are neither space nor word characters: they end up
// inside some word, which is then unknown.
CharKind Kind(const Utf8Char& c) {
  if (c.kind != Utf8Char::Kind::kValid) return CharKind::kOther;
  const auto cp = static_cast<UChar32>(c.code_point);
  if (u_isUWhiteSpace(cp)) return CharKind::kSpace;
  // \w as Unicode regular expressions (UTS #18) define it.
  const uint32_t mask = U_GET_GC_MASK(cp);
  if (u_hasBinaryProperty(cp, UCHAR_ALPHABETIC) ||
      (mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
      u_hasBinaryProperty(cp, UCHAR_JOIN_CONTROL)) {
    return CharKind::kWord;
  }
  return CharKind::kOther;
}

// Appends the words of `text`: maximal runs of characters whose kind is not
// space and, when `split_punctuation`, is the same.
void SplitWords(std::string_view text, bool split_punctuation,
                std::vector<std::string_view>& words) {
  size_t start = 0;
  CharKind run = CharKind::kSpace;
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Char c = ReadUtf8Char(text, pos);
    CharKind kind = Kind(c);
    if (!split_punctuation && kind != CharKind::kSpace) kind = CharKind::kWord;
    if (kind != run) {
      if (run != CharKind::kSpace) {
        words.push_back(text.substr(start, pos - start));
      }
      start = pos;
      run = kind;
    }
    pos += c.length;
  }
  if (run != CharKind::kSpace) words.push_back(text.substr(start));
}

}  // namespace

absl::StatusOr<std::unique_ptr<WordLevelTokenizer>> WordLevelTokenizer::Create(
    WordLevelOptions options) {
  absl::StatusOr<Vocabulary> vocab =
      Vocabulary::Create(std::move(options.vocab), options.added_tokens);
  if (!vocab.ok()) return vocab.status();
  std::unique_ptr<WordLevelTokenizer> tokenizer(
      new WordLevelTokenizer(*std::move(vocab)));
  const std::optional<int32_t> unk = tokenizer->vocab_.Find(options.unk_token);
  if (!unk.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unk_token \"", options.unk_token, "\" is not in the vocab"));
  }
  tokenizer->unk_id_ = *unk;
  tokenizer->added_ = AddedTokenMatcher(std::move(options.added_tokens));
  tokenizer->split_ = options.split;
  return tokenizer;
}

absl::StatusOr<std::vector<int32_t>> WordLevelTokenizer::Encode(
    std::string_view text) const {
  std::vector<int32_t> ids;
  std::vector<std::string_view> words;
  for (const TextSegment& segment : added_.Split(text)) {
    if (segment.added_id >= 0) {
      ids.push_back(segment.added_id);
      continue;
    }
    words.clear();
    SplitWords(segment.text, split_ == WordSplit::kWordsAndPunctuation, words);
    for (const std::string_view word : words) {
      ids.push_back(vocab_.Find(word).value_or(unk_id_));
    }
  }
  return ids;
}

absl::StatusOr<std::string> WordLevelTokenizer::Decode(
    absl::Span<const int32_t> ids) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string* token = vocab_.Token(ids[i]);
    if (token == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", ids[i], " is not in the vocabulary (size ",
                       vocab_.size(), ")"));
    }
    if (i > 0) text += ' ';
    text += *token;
  }
  return text;
}

}  // namespace twice::engine
