// GPT-2's byte-to-unicode alphabet: every byte 0..255 maps to one printable
// code point so that a byte-level BPE vocabulary can be stored as text.
// Printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') map to themselves;
// the other 68 bytes map, in byte order, to U+0100, U+0101, ... (so ' ' is
// 'Ġ' U+0120 and '\n' is 'Ċ' U+010A).
#ifndef TWICE_ENGINE_TOKENIZER_BYTE_LEVEL_ALPHABET_H_
#define TWICE_ENGINE_TOKENIZER_BYTE_LEVEL_ALPHABET_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace twice::engine {

// The code point that stands for `byte`.
char32_t ByteToCodePoint(uint8_t byte);

// The byte a code point stands for, if it is in the alphabet.
std::optional<uint8_t> CodePointToByte(char32_t code_point);

// Maps raw bytes to their alphabet text (UTF-8).
std::string BytesToByteLevel(std::string_view bytes);

// Maps alphabet text back to raw bytes. Characters outside the alphabet (or
// invalid UTF-8) are copied through unchanged, as HuggingFace's ByteLevel
// decoder does; returns false if any was.
bool ByteLevelToBytes(std::string_view text, std::string& bytes);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_TOKENIZER_BYTE_LEVEL_ALPHABET_H_
