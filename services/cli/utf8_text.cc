#include "services/cli/utf8_text.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"

namespace twice::cli {
namespace {

// Length of the valid character starting at text[i], 0 when invalid.
size_t CharLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length;
  uint32_t min;
  uint32_t code;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, min = 0x80, code = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, min = 0x800, code = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, min = 0x10000, code = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(k) & 0x3F);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
    return 0;
  }
  return length;
}

}  // namespace

std::optional<size_t> FirstInvalidUtf8Byte(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t length = CharLength(text, i);
    if (length == 0) return i;
    i += length;
  }
  return std::nullopt;
}

absl::Status CheckUtf8File(std::string_view path, std::string_view text) {
  const std::optional<size_t> bad = FirstInvalidUtf8Byte(text);
  if (!bad.has_value()) return absl::OkStatus();
  char value[8];
  std::snprintf(value, sizeof(value), "0x%02X",
                static_cast<unsigned>(static_cast<uint8_t>(text[*bad])));
  return absl::InvalidArgumentError(absl::StrCat(
      std::string(path), " is not UTF-8 text: byte ", *bad, " (", value,
      ") does not start a valid UTF-8 character. Convert the file (for "
      "example `iconv -f LATIN1 -t UTF-8`), or send the document as token "
      "ids (IngestRequest.tokens / AppendRequest.tokens in the API)"));
}

size_t Utf8PieceEnd(std::string_view text, size_t offset, size_t max_bytes) {
  size_t end = std::min(text.size(), offset + max_bytes);
  if (end == text.size()) return end;
  // Back up over continuation bytes to the start of the split character.
  size_t cut = end;
  while (cut > offset && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  return cut > offset ? cut : end;
}

}  // namespace twice::cli
