// GPT-2's pre-tokenizer: splits text into the pieces BPE then encodes one at
// a time, matching the pattern
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// leftmost alternative first, as a backtracking regex engine would. \p{L}
// and \p{N} are Unicode general categories L* and N*; \s is the Unicode
// White_Space property (as in the `regex` module GPT-2 was trained with).
// Written by hand over ICU character properties: std::regex has no Unicode
// classes and is slow.
//
// Invalid UTF-8 bytes become one-byte pieces of their own and count as \S.
#ifndef TWICE_ENGINE_TOKENIZER_GPT2_PRETOKENIZER_H_
#define TWICE_ENGINE_TOKENIZER_GPT2_PRETOKENIZER_H_

#include <string_view>
#include <vector>

namespace twice::engine {

// Pieces are views into `text`; concatenated they give `text` back.
std::vector<std::string_view> SplitGpt2(std::string_view text);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_TOKENIZER_GPT2_PRETOKENIZER_H_
