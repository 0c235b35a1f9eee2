#include "engine/tokenizer/utf8.h"

#include <cstdint>

namespace twice::engine {
namespace {

bool IsContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

Utf8Char ReadUtf8Char(std::string_view text, size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  if (lead < 0x80) return {Utf8Char::Kind::kValid, lead, 1};

  int length = 0;
  char32_t code_point = 0;
  // The smallest code point each length may encode; below it is overlong.
  char32_t minimum = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code_point = lead & 0x1F;
    minimum = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code_point = lead & 0x0F;
    minimum = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code_point = lead & 0x07;
    minimum = 0x10000;
  } else {
    return {};  // continuation byte, 0xC0/0xC1 or 0xF5..0xFF
  }

  for (int i = 1; i < length; ++i) {
    if (pos + i >= text.size()) {
      // Cut short by the end. A sequence whose second byte already rules
      // out a valid character would have returned kInvalid below, so what
      // is left could still be completed.
      return {Utf8Char::Kind::kIncomplete, 0, static_cast<int>(i)};
    }
    const auto byte = static_cast<unsigned char>(text[pos + i]);
    if (!IsContinuation(byte)) return {};
    code_point = (code_point << 6) | (byte & 0x3F);
    if (i == 1) {
      // Reject overlong, surrogate and out-of-range forms as soon as the
      // second byte shows them, so an incomplete tail is never one of them.
      const char32_t top = code_point << (6 * (length - 2));
      if (top < minimum || (top >= 0xD800 && top <= 0xDFFF) || top > 0x10FFFF) {
        return {};
      }
    }
  }
  return {Utf8Char::Kind::kValid, code_point, length};
}

size_t CompleteUtf8PrefixLength(std::string_view text) {
  // Only the last three bytes can start a sequence the end cuts short.
  const size_t start = text.size() > 3 ? text.size() - 3 : 0;
  size_t pos = Utf8BoundaryAtOrBefore(text, start);
  while (pos < text.size()) {
    const Utf8Char c = ReadUtf8Char(text, pos);
    if (c.kind == Utf8Char::Kind::kIncomplete) return pos;
    pos += c.length;
  }
  return text.size();
}

size_t Utf8BoundaryAtOrBefore(std::string_view text, size_t pos) {
  // A character is at most four bytes, so a boundary is at most three bytes
  // back: find the lead byte whose valid sequence covers `pos`, if any.
  for (size_t back = 1; back <= 3 && back <= pos; ++back) {
    const size_t start = pos - back;
    if (IsContinuation(static_cast<unsigned char>(text[start]))) continue;
    const Utf8Char c = ReadUtf8Char(text, start);
    if (c.kind != Utf8Char::Kind::kInvalid &&
        start + static_cast<size_t>(c.length) > pos) {
      return start;
    }
    break;
  }
  return pos;
}

void AppendUtf8(char32_t code_point, std::string& out) {
  const auto cp = static_cast<uint32_t>(code_point);
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace twice::engine
