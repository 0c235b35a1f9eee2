#include "engine/tokenizer/gpt2_pretokenizer.h"

#include <cstddef>
#include <cstdint>

#include "engine/tokenizer/utf8.h"
#include "unicode/uchar.h"

namespace twice::engine {
namespace {

enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther, kInvalid };

struct Char {
  char32_t code_point;
  uint32_t offset;  // byte offset in the text
  CharClass cls;
};

CharClass Classify(char32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  const uint32_t mask = U_GET_GC_MASK(c);
  if (mask & U_GC_L_MASK) return CharClass::kLetter;
  if (mask & U_GC_N_MASK) return CharClass::kNumber;
  if (u_isUWhiteSpace(c)) return CharClass::kSpace;
  return CharClass::kOther;
}

std::vector<Char> Decode(std::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Char c = ReadUtf8Char(text, pos);
    if (c.kind == Utf8Char::Kind::kValid) {
      chars.push_back(
          {c.code_point, static_cast<uint32_t>(pos), Classify(c.code_point)});
      pos += c.length;
    } else {
      // Incomplete sequences too: each byte is a piece of its own.
      chars.push_back({0, static_cast<uint32_t>(pos), CharClass::kInvalid});
      pos += 1;
    }
  }
  return chars;
}

class Splitter {
 public:
  explicit Splitter(std::string_view text)
      : text_(text), chars_(Decode(text)) {}

  std::vector<std::string_view> Split() {
    std::vector<std::string_view> pieces;
    size_t i = 0;
    while (i < chars_.size()) {
      const size_t end = MatchAt(i);
      pieces.push_back(text_.substr(Offset(i), Offset(end) - Offset(i)));
      i = end;
    }
    return pieces;
  }

 private:
  size_t Offset(size_t i) const {
    return i < chars_.size() ? chars_[i].offset : text_.size();
  }
  bool Is(size_t i, CharClass cls) const {
    return i < chars_.size() && chars_[i].cls == cls;
  }
  bool IsAscii(size_t i, char c) const {
    return i < chars_.size() &&
           chars_[i].code_point == static_cast<char32_t>(c) &&
           chars_[i].cls != CharClass::kInvalid;
  }
  size_t RunEnd(size_t i, CharClass cls) const {
    while (Is(i, cls)) ++i;
    return i;
  }

  // Returns the end (in chars) of the match starting at char `i`.
  size_t MatchAt(size_t i) const {
    if (chars_[i].cls == CharClass::kInvalid) return i + 1;

    // 's|'t|'re|'ve|'m|'ll|'d
    if (IsAscii(i, '\'')) {
      if (IsAscii(i + 1, 's') || IsAscii(i + 1, 't') || IsAscii(i + 1, 'm') ||
          IsAscii(i + 1, 'd')) {
        return i + 2;
      }
      if ((IsAscii(i + 1, 'r') && IsAscii(i + 2, 'e')) ||
          (IsAscii(i + 1, 'v') && IsAscii(i + 2, 'e')) ||
          (IsAscii(i + 1, 'l') && IsAscii(i + 2, 'l'))) {
        return i + 3;
      }
    }

    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: the optional space is
    // U+0020 only.
    const size_t body = IsAscii(i, ' ') ? i + 1 : i;
    for (const CharClass cls :
         {CharClass::kLetter, CharClass::kNumber, CharClass::kOther}) {
      if (Is(body, cls)) return RunEnd(body, cls);
      // Without the space the run would have to start at `i`, which is the
      // space itself and so belongs to none of these classes.
    }

    // \s+(?!\S) then \s+: a whitespace run followed by a non-space gives up
    // its last character to the next piece (so " word" keeps its space),
    // unless the run is a single character.
    const size_t run_end = RunEnd(i, CharClass::kSpace);
    if (run_end == chars_.size()) return run_end;
    if (run_end - i >= 2) return run_end - 1;
    return run_end;
  }

  std::string_view text_;
  std::vector<Char> chars_;
};

}  // namespace

std::vector<std::string_view> SplitGpt2(std::string_view text) {
  return Splitter(text).Split();
}

}  // namespace twice::engine
