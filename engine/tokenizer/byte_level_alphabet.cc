#include "engine/tokenizer/byte_level_alphabet.h"

#include <array>

#include "engine/tokenizer/utf8.h"

namespace twice::engine {
namespace {

bool MapsToItself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

struct Alphabet {
  std::array<char32_t, 256> to_code_point{};
  // Every alphabet code point is below U+0144 (256 + 68).
  static constexpr int kCodePoints = 0x144;
  std::array<int16_t, kCodePoints> to_byte{};

  Alphabet() {
    to_byte.fill(-1);
    int next = 0;
    for (int byte = 0; byte < 256; ++byte) {
      const char32_t cp = MapsToItself(byte) ? byte : 256 + next++;
      to_code_point[byte] = cp;
      to_byte[cp] = static_cast<int16_t>(byte);
    }
  }
};

const Alphabet& GetAlphabet() {
  static const Alphabet* const alphabet = new Alphabet();
  return *alphabet;
}

}  // namespace

char32_t ByteToCodePoint(uint8_t byte) {
  return GetAlphabet().to_code_point[byte];
}

std::optional<uint8_t> CodePointToByte(char32_t code_point) {
  if (code_point >= static_cast<char32_t>(Alphabet::kCodePoints)) {
    return std::nullopt;
  }
  const int16_t byte = GetAlphabet().to_byte[code_point];
  if (byte < 0) return std::nullopt;
  return static_cast<uint8_t>(byte);
}

std::string BytesToByteLevel(std::string_view bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (const char b : bytes) {
    AppendUtf8(ByteToCodePoint(static_cast<uint8_t>(b)), text);
  }
  return text;
}

bool ByteLevelToBytes(std::string_view text, std::string& bytes) {
  bool all_in_alphabet = true;
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Char c = ReadUtf8Char(text, pos);
    std::optional<uint8_t> byte;
    if (c.kind == Utf8Char::Kind::kValid) byte = CodePointToByte(c.code_point);
    if (byte.has_value()) {
      bytes.push_back(static_cast<char>(*byte));
    } else {
      bytes.append(text.substr(pos, c.length));
      all_in_alphabet = false;
    }
    pos += c.length;
  }
  return all_in_alphabet;
}

}  // namespace twice::engine
