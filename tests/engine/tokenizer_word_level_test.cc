// WordLevel: a small inline tokenizer.json, unknown words, added tokens and
// round trips (whitespace comes back as single spaces).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kWhitespaceSplit[] = R"({
  "version": "1.0",
  "added_tokens": [{"id": 6, "content": "[SEP]", "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "WhitespaceSplit"},
  "decoder": null,
  "model": {
    "type": "WordLevel",
    "vocab": {"[UNK]": 0, "hello": 1, "world": 2, "hello,": 3, "!": 4,
              "héllo": 5, "[SEP]": 6},
    "unk_token": "[UNK]"
  }
})";

std::unique_ptr<Tokenizer> Load(std::string json) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::FromJson(json);
  EXPECT_OK(t);
  return t.ok() ? *std::move(t) : nullptr;
}

std::vector<int32_t> Encode(const Tokenizer& t, std::string_view text) {
  absl::StatusOr<std::vector<int32_t>> ids = t.Encode(text);
  EXPECT_OK(ids);
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

std::string Decode(const Tokenizer& t, const std::vector<int32_t>& ids) {
  absl::StatusOr<std::string> text = t.Decode(ids);
  EXPECT_OK(text);
  return text.ok() ? *text : std::string();
}

TEST(WordLevelTokenizerTest, Loads) {
  auto t = Load(kWhitespaceSplit);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->kind(), "wordlevel");
  EXPECT_EQ(t->vocab_size(), 7);
  EXPECT_EQ(t->TokenToId("world"), 2);
  EXPECT_EQ(t->TokenToId("[SEP]"), 6);
  EXPECT_EQ(t->TokenToId("planet"), std::nullopt);
}

TEST(WordLevelTokenizerTest, SplitsAtAnyWhitespace) {
  auto t = Load(kWhitespaceSplit);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(Encode(*t, "hello world"), ElementsAre(1, 2));
  EXPECT_THAT(Encode(*t, "  hello\t\n world \u3000 héllo  "),
              ElementsAre(1, 2, 5));
  EXPECT_THAT(Encode(*t, "hello, world !"), ElementsAre(3, 2, 4));
  EXPECT_TRUE(Encode(*t, "").empty());
  EXPECT_TRUE(Encode(*t, " \n ").empty());
}

TEST(WordLevelTokenizerTest, UnknownWordsBecomeUnk) {
  auto t = Load(kWhitespaceSplit);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(Encode(*t, "hello planet world"), ElementsAre(1, 0, 2));
  EXPECT_THAT(Encode(*t, "Hello"), ElementsAre(0));  // case matters
  // Invalid UTF-8 never matches a vocabulary entry, and never crashes.
  EXPECT_THAT(Encode(*t, "hello \xff\xfe world h\xc3"),
              ElementsAre(1, 0, 2, 0));
}

TEST(WordLevelTokenizerTest, AddedTokensAreCutOutFirst) {
  auto t = Load(kWhitespaceSplit);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(Encode(*t, "hello[SEP]world"), ElementsAre(1, 6, 2));
  EXPECT_THAT(Encode(*t, "[SEP] [SEP]"), ElementsAre(6, 6));
}

TEST(WordLevelTokenizerTest, RoundTripNormalizesWhitespace) {
  auto t = Load(kWhitespaceSplit);
  ASSERT_NE(t, nullptr);
  for (const std::string text :
       {"hello world", "hello, world !", "héllo [SEP] hello", "world"}) {
    EXPECT_EQ(Decode(*t, Encode(*t, text)), text);
  }
  EXPECT_EQ(Decode(*t, Encode(*t, "  hello \n\n world ")), "hello world");
  EXPECT_EQ(Decode(*t, Encode(*t, "hello mars")), "hello [UNK]");
  EXPECT_EQ(Decode(*t, {}), "");
}

TEST(WordLevelTokenizerTest, WhitespacePreTokenizerSplitsPunctuation) {
  std::string json = kWhitespaceSplit;
  json.replace(json.find("WhitespaceSplit"), 15, "Whitespace");
  auto t = Load(json);
  ASSERT_NE(t, nullptr);
  // \w+|[^\w\s]+ : "hello," is two words now.
  EXPECT_THAT(Encode(*t, "hello, world!"), ElementsAre(1, 0, 2, 4));
  EXPECT_THAT(Encode(*t, "héllo!!"), ElementsAre(5, 0));
}

TEST(WordLevelTokenizerTest, DecodeRejectsIdsOutsideVocabulary) {
  auto t = Load(kWhitespaceSplit);
  ASSERT_NE(t, nullptr);
  for (const int32_t id : {-1, 7, 1000}) {
    EXPECT_EQ(t->Decode(std::vector<int32_t>{1, id}).status().code(),
              absl::StatusCode::kInvalidArgument)
        << id;
  }
}

TEST(WordLevelTokenizerTest, BadFilesAreInvalidArgument) {
  std::string missing_unk = kWhitespaceSplit;
  missing_unk.replace(missing_unk.find(R"("unk_token": "[UNK]")"), 20,
                      R"("unk_token": "<unk>")");
  const absl::Status status = Tokenizer::FromJson(missing_unk).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("<unk>"));

  std::string no_vocab = kWhitespaceSplit;
  no_vocab.replace(no_vocab.find(R"("vocab")"), 7, R"("vocabulary")");
  EXPECT_EQ(Tokenizer::FromJson(no_vocab).status().code(),
            absl::StatusCode::kInvalidArgument);

  std::string bad_split = kWhitespaceSplit;
  bad_split.replace(bad_split.find("WhitespaceSplit"), 15, "BertPreTokenizer");
  EXPECT_EQ(Tokenizer::FromJson(bad_split).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::engine
