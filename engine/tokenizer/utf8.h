// UTF-8 helpers shared by the tokenizers and the generator's streaming.
// They never fail: bytes that do not form a valid UTF-8 sequence are reported
// as such so callers can treat them one byte at a time.
#ifndef TWICE_ENGINE_TOKENIZER_UTF8_H_
#define TWICE_ENGINE_TOKENIZER_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace twice::engine {

// Outcome of reading one character at a position.
struct Utf8Char {
  enum class Kind {
    kValid,       // `length` bytes form `code_point`
    kInvalid,     // the byte at the position starts no valid sequence
    kIncomplete,  // a valid sequence that the end of the text cuts short
  };
  Kind kind = Kind::kInvalid;
  char32_t code_point = 0;
  int length = 1;  // bytes consumed; 1 for kInvalid, the rest for kIncomplete
};

// Reads the character starting at `text[pos]` (pos < text.size()). Overlong
// forms, surrogates and values above U+10FFFF are invalid.
Utf8Char ReadUtf8Char(std::string_view text, size_t pos);

// Length of the longest prefix of `text` that does not end inside a
// character the text cuts short. Invalid bytes count as whole characters:
// no further byte can complete them, so holding them back gains nothing.
size_t CompleteUtf8PrefixLength(std::string_view text);

// Largest character boundary <= `pos` (0 <= pos <= text.size()); invalid
// bytes are one-byte characters.
size_t Utf8BoundaryAtOrBefore(std::string_view text, size_t pos);

// Appends the UTF-8 encoding of a valid code point.
void AppendUtf8(char32_t code_point, std::string& out);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_TOKENIZER_UTF8_H_
