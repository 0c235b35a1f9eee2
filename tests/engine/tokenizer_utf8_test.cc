// UTF-8 helpers: what counts as valid, cut short, or invalid, and where a
// stream may be cut without splitting a character.
#include <string>

#include "engine/tokenizer/utf8.h"
#include "gtest/gtest.h"

namespace twice::engine {
namespace {

using Kind = Utf8Char::Kind;

TEST(Utf8Test, ReadsValidCharacters) {
  const std::string text = "aé日🍕";
  Utf8Char c = ReadUtf8Char(text, 0);
  EXPECT_EQ(c.kind, Kind::kValid);
  EXPECT_EQ(c.code_point, U'a');
  c = ReadUtf8Char(text, 1);
  EXPECT_EQ(c.kind, Kind::kValid);
  EXPECT_EQ(c.code_point, U'é');
  EXPECT_EQ(c.length, 2);
  c = ReadUtf8Char(text, 3);
  EXPECT_EQ(c.code_point, U'日');
  EXPECT_EQ(c.length, 3);
  c = ReadUtf8Char(text, 6);
  EXPECT_EQ(c.code_point, U'🍕');
  EXPECT_EQ(c.length, 4);
}

TEST(Utf8Test, RejectsMalformedSequences) {
  for (const std::string bad :
       {"\x80", "\xbf", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xed\xa0\x80",
        "\xf0\x80\x80\xaf", "\xf4\x90\x80\x80", "\xf5\x80", "\xff",
        "\xc3"
        "a",
        "\xe6\x97"
        "a"}) {
    EXPECT_EQ(ReadUtf8Char(bad, 0).kind, Kind::kInvalid) << bad.size();
    EXPECT_EQ(ReadUtf8Char(bad, 0).length, 1);
  }
}

TEST(Utf8Test, SequencesCutShortAreIncomplete) {
  EXPECT_EQ(ReadUtf8Char("\xc3", 0).kind, Kind::kIncomplete);
  EXPECT_EQ(ReadUtf8Char("\xe6\x97", 0).kind, Kind::kIncomplete);
  EXPECT_EQ(ReadUtf8Char("\xe6\x97", 0).length, 2);
  EXPECT_EQ(ReadUtf8Char("\xf0\x9f\x8d", 0).kind, Kind::kIncomplete);
  // A second byte that already rules out every completion is invalid.
  EXPECT_EQ(ReadUtf8Char("\xed\xa0", 0).kind, Kind::kInvalid);
}

TEST(Utf8Test, CompletePrefixLength) {
  EXPECT_EQ(CompleteUtf8PrefixLength(""), 0u);
  EXPECT_EQ(CompleteUtf8PrefixLength("abc"), 3u);
  EXPECT_EQ(CompleteUtf8PrefixLength("ab\xc3"), 2u);
  EXPECT_EQ(CompleteUtf8PrefixLength("ab\xf0\x9f\x8d"), 2u);
  EXPECT_EQ(CompleteUtf8PrefixLength("ab\xf0\x9f\x8d\x95"), 6u);
  // Invalid bytes can never complete, so they are not held back.
  EXPECT_EQ(CompleteUtf8PrefixLength("ab\xff"), 3u);
  EXPECT_EQ(CompleteUtf8PrefixLength("ab\x80"), 3u);
}

TEST(Utf8Test, BoundaryAtOrBefore) {
  const std::string text = "a日b";  // a | E6 97 A5 | b
  EXPECT_EQ(Utf8BoundaryAtOrBefore(text, 0), 0u);
  EXPECT_EQ(Utf8BoundaryAtOrBefore(text, 1), 1u);
  EXPECT_EQ(Utf8BoundaryAtOrBefore(text, 2), 1u);
  EXPECT_EQ(Utf8BoundaryAtOrBefore(text, 3), 1u);
  EXPECT_EQ(Utf8BoundaryAtOrBefore(text, 4), 4u);
  EXPECT_EQ(Utf8BoundaryAtOrBefore(text, 5), 5u);
  // Stray continuation bytes are characters of their own.
  EXPECT_EQ(Utf8BoundaryAtOrBefore("a\x80\x80", 2), 2u);
}

TEST(Utf8Test, AppendRoundTrips) {
  for (const char32_t cp :
       {U'\0', U'a', U'\x7f', U'\x80', U'é', U'\x7ff', U'\x800', U'日',
        U'\xffff', U'\x10000', U'🍕', U'\x10ffff'}) {
    std::string text;
    AppendUtf8(cp, text);
    const Utf8Char c = ReadUtf8Char(text, 0);
    EXPECT_EQ(c.kind, Kind::kValid);
    EXPECT_EQ(c.code_point, cp);
    EXPECT_EQ(static_cast<size_t>(c.length), text.size());
  }
}

}  // namespace
}  // namespace twice::engine
