// Byte-level BPE against GPT-2 ids from an independent encoder (the fixture
// tools/tokenizer/make_fixture.js writes), plus round trips and load errors.
#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "engine/tokenizer/byte_level_alphabet.h"
#include "engine/tokenizer/gpt2_pretokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kGpt2Path[] = "models/tokenizers/gpt2/tokenizer.json";
constexpr char kFixturePath[] = "tests/data/gpt2_tokenizer_fixture.json";

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// Loading the 50k-token vocabulary takes a moment; do it once.
const Tokenizer& Gpt2() {
  static const Tokenizer* const tokenizer = [] {
    absl::StatusOr<std::unique_ptr<Tokenizer>> t =
        Tokenizer::FromFile(kGpt2Path);
    EXPECT_OK(t);
    return t.ok() ? t->release() : nullptr;
  }();
  return *tokenizer;
}

std::vector<int32_t> EncodeOrDie(const Tokenizer& t, std::string_view text) {
  absl::StatusOr<std::vector<int32_t>> ids = t.Encode(text);
  EXPECT_OK(ids);
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

std::string DecodeOrDie(const Tokenizer& t, const std::vector<int32_t>& ids) {
  absl::StatusOr<std::string> text = t.Decode(ids);
  EXPECT_OK(text);
  return text.ok() ? *text : std::string();
}

int32_t ByteId(const Tokenizer& t, uint8_t byte) {
  return t.TokenToId(BytesToByteLevel(std::string(1, static_cast<char>(byte))))
      .value_or(-1);
}

TEST(Gpt2TokenizerTest, Loads) {
  const Tokenizer& t = Gpt2();
  EXPECT_EQ(t.kind(), "bpe");
  EXPECT_EQ(t.vocab_size(), 50257);
  EXPECT_EQ(t.TokenToId("<|endoftext|>"), 50256);
  EXPECT_EQ(t.TokenToId("Ġthe"), 262);
  EXPECT_EQ(t.TokenToId("no such token"), std::nullopt);
}

TEST(Gpt2TokenizerTest, KnownIds) {
  // Widely published GPT-2 ids.
  EXPECT_THAT(EncodeOrDie(Gpt2(), "Hello world"), ElementsAre(15496, 995));
  EXPECT_THAT(EncodeOrDie(Gpt2(), " the"), ElementsAre(262));
  EXPECT_TRUE(EncodeOrDie(Gpt2(), "").empty());
}

TEST(Gpt2TokenizerTest, MatchesReferenceEncoderOnFixture) {
  const nlohmann::json fixture =
      nlohmann::json::parse(ReadFile(kFixturePath), nullptr,
                            /*allow_exceptions=*/false);
  ASSERT_FALSE(fixture.is_discarded()) << "cannot read " << kFixturePath;
  const auto& texts = fixture["texts"];
  const auto& ids = fixture["ids"];
  ASSERT_EQ(texts.size(), ids.size());
  ASSERT_GE(texts.size(), 40u);
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    const std::vector<int32_t> expected = ids[i].get<std::vector<int32_t>>();
    EXPECT_EQ(EncodeOrDie(Gpt2(), text), expected) << "text: " << text;
    EXPECT_EQ(DecodeOrDie(Gpt2(), expected), text);
  }
}

TEST(Gpt2TokenizerTest, EndOfTextIsOneTokenInsideText) {
  const Tokenizer& t = Gpt2();
  const std::vector<int32_t> hello = EncodeOrDie(t, "Hello");
  const std::vector<int32_t> world = EncodeOrDie(t, " world");
  std::vector<int32_t> expected = hello;
  expected.push_back(50256);
  expected.insert(expected.end(), world.begin(), world.end());
  EXPECT_EQ(EncodeOrDie(t, "Hello<|endoftext|> world"), expected);
  EXPECT_THAT(EncodeOrDie(t, "<|endoftext|><|endoftext|>"),
              ElementsAre(50256, 50256));
  EXPECT_EQ(DecodeOrDie(t, {50256}), "<|endoftext|>");
  // A partial marker is ordinary text.
  EXPECT_EQ(DecodeOrDie(t, EncodeOrDie(t, "<|endoftext")), "<|endoftext");
}

TEST(Gpt2TokenizerTest, InvalidUtf8IsEncodedByteByByte) {
  const Tokenizer& t = Gpt2();
  EXPECT_THAT(EncodeOrDie(t, "\xff"), ElementsAre(ByteId(t, 0xff)));
  // A lead byte cut short by the end, and a stray continuation byte.
  EXPECT_THAT(EncodeOrDie(t, "a\xe6\x97"),
              ElementsAre(ByteId(t, 'a'), ByteId(t, 0xe6), ByteId(t, 0x97)));
  EXPECT_EQ(DecodeOrDie(t, EncodeOrDie(t, "ok\x80\xc0\xafok")),
            "ok\x80\xc0\xafok");
}

TEST(Gpt2TokenizerTest, DecodeOfPrefixMayEndInsideCharacter) {
  const Tokenizer& t = Gpt2();
  // Byte tokens of "é" (C3 A9): the first alone decodes to one byte.
  EXPECT_EQ(DecodeOrDie(t, {ByteId(t, 0xc3)}), "\xc3");
  EXPECT_EQ(DecodeOrDie(t, {ByteId(t, 0xc3), ByteId(t, 0xa9)}), "é");
}

TEST(Gpt2TokenizerTest, RoundTripsRandomBytes) {
  const Tokenizer& t = Gpt2();
  std::mt19937_64 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text(rng() % 64, '\0');
    for (char& c : text) {
      // Mostly ASCII with spaces, so pieces look like words; some bytes
      // from everywhere, so invalid UTF-8 is common.
      const uint64_t r = rng();
      c = static_cast<char>(r % 4 == 0 ? (r >> 8) % 256
                                       : "ab c'1\n"[(r >> 8) % 7]);
    }
    EXPECT_EQ(DecodeOrDie(t, EncodeOrDie(t, text)), text);
  }
}

TEST(Gpt2TokenizerTest, RoundTripsRandomUnicode) {
  const Tokenizer& t = Gpt2();
  const std::vector<std::string> alphabet = {
      "a",      "Z",      " ", "  ", "\n", "\t", "'",        "'s",
      "7",      "é",      "ß", "日", "本", "🍕",  "👍🏽", "\u200d",
      "\u00a0", "\u3000", "١", "½",  ".",  "!!", "ŉ"};
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    for (uint64_t n = rng() % 24; n > 0; --n) {
      text += alphabet[rng() % alphabet.size()];
    }
    EXPECT_EQ(DecodeOrDie(t, EncodeOrDie(t, text)), text);
  }
}

TEST(Gpt2TokenizerTest, ConcurrentEncodesAgree) {
  // Encode shares a cache between threads; results must not depend on it.
  const Tokenizer& t = Gpt2();
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) {
    texts.push_back("word" + std::to_string(i % 37) + " and café " +
                    std::to_string(i));
  }
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& text : texts)
    expected.push_back(EncodeOrDie(t, text));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const absl::StatusOr<std::vector<int32_t>> ids = t.Encode(texts[i]);
          mismatches[k] += !ids.ok() || *ids != expected[i];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(mismatches[k], 0) << "thread " << k;
}

TEST(Gpt2TokenizerTest, DecodeRejectsIdsOutsideVocabulary) {
  const Tokenizer& t = Gpt2();
  for (const int32_t id : {-1, 50257, 1 << 30}) {
    const absl::StatusOr<std::string> text = t.Decode(std::vector<int32_t>{id});
    EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument) << id;
  }
}

TEST(Gpt2PretokenizerTest, SplitsLikeTheGpt2Pattern) {
  using Pieces = std::vector<std::string_view>;
  EXPECT_EQ(SplitGpt2("Hello  world"), (Pieces{"Hello", " ", " world"}));
  EXPECT_EQ(SplitGpt2("I'm we'll"), (Pieces{"I", "'m", " we", "'ll"}));
  EXPECT_EQ(SplitGpt2("ab12 34!?"), (Pieces{"ab", "12", " 34", "!?"}));
  EXPECT_EQ(SplitGpt2("a \n\nb  "), (Pieces{"a", " \n", "\n", "b", "  "}));
  EXPECT_EQ(SplitGpt2("x\ny"), (Pieces{"x", "\n", "y"}));
  EXPECT_EQ(SplitGpt2("'S 'x"), (Pieces{"'", "S", " '", "x"}));
  EXPECT_EQ(SplitGpt2("café 日本"), (Pieces{"café", " 日本"}));
  EXPECT_EQ(SplitGpt2("a\xff b"), (Pieces{"a", "\xff", " b"}));
  EXPECT_TRUE(SplitGpt2("").empty());
}

// A tiny byte-level BPE: the 256 byte tokens, then "ab", "bc", "abc".
nlohmann::json TinyBpe(const nlohmann::json& merges) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) {
    vocab[BytesToByteLevel(std::string(1, static_cast<char>(b)))] = b;
  }
  vocab["ab"] = 256;
  vocab["bc"] = 257;
  vocab["abc"] = 258;
  return {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"decoder", {{"type", "ByteLevel"}}}};
}

std::unique_ptr<Tokenizer> LoadOrDie(const nlohmann::json& json) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t =
      Tokenizer::FromJson(json.dump());
  EXPECT_OK(t);
  return t.ok() ? *std::move(t) : nullptr;
}

TEST(BpeTokenizerTest, MergesAppliedInRankOrder) {
  auto ab_first = LoadOrDie(TinyBpe({"a b", "b c", "ab c"}));
  ASSERT_NE(ab_first, nullptr);
  EXPECT_THAT(EncodeOrDie(*ab_first, "abc"), ElementsAre(258));
  EXPECT_THAT(EncodeOrDie(*ab_first, "abab"), ElementsAre(256, 256));
  EXPECT_THAT(EncodeOrDie(*ab_first, "bcb"), ElementsAre(257, 'b'));

  auto bc_first = LoadOrDie(TinyBpe({"b c", "a b"}));
  ASSERT_NE(bc_first, nullptr);
  EXPECT_THAT(EncodeOrDie(*bc_first, "abc"), ElementsAre('a', 257));
}

TEST(BpeTokenizerTest, MergesAsPairsEqualMergesAsStrings) {
  // Built explicitly: a braced list of string pairs would become an object.
  auto pairs = LoadOrDie(
      TinyBpe(nlohmann::json::array({nlohmann::json::array({"a", "b"}),
                                     nlohmann::json::array({"ab", "c"})})));
  auto strings = LoadOrDie(TinyBpe({"a b", "ab c"}));
  ASSERT_NE(pairs, nullptr);
  ASSERT_NE(strings, nullptr);
  EXPECT_EQ(EncodeOrDie(*pairs, "xabcab"), EncodeOrDie(*strings, "xabcab"));
  EXPECT_THAT(EncodeOrDie(*pairs, "abc"), ElementsAre(258));
}

TEST(BpeTokenizerTest, AddPrefixSpace) {
  nlohmann::json json = TinyBpe({"a b"});
  json["pre_tokenizer"]["add_prefix_space"] = true;
  auto t = LoadOrDie(json);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(DecodeOrDie(*t, EncodeOrDie(*t, "ab")), " ab");
  EXPECT_EQ(DecodeOrDie(*t, EncodeOrDie(*t, " ab")), " ab");
}

absl::StatusCode LoadCode(std::string_view json) {
  return Tokenizer::FromJson(json).status().code();
}

std::string LoadMessage(std::string_view json) {
  return std::string(Tokenizer::FromJson(json).status().message());
}

TEST(BpeTokenizerTest, BadFilesAreInvalidArgument) {
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(LoadCode("{not json"), kInvalid);
  EXPECT_EQ(LoadCode(""), kInvalid);
  EXPECT_EQ(LoadCode("[]"), kInvalid);
  EXPECT_EQ(LoadCode(R"({"model": {"type": "Unigram", "vocab": []}})"),
            kInvalid);
  EXPECT_THAT(LoadMessage(R"({"model": {"type": "Unigram", "vocab": []}})"),
              HasSubstr("Unigram"));

  // Malformed merges and merges naming tokens the vocab lacks.
  for (const nlohmann::json& merges :
       {nlohmann::json{"ab"}, nlohmann::json{"a b c"}, nlohmann::json{7},
        nlohmann::json::array({nlohmann::json::array({"a"})}),
        nlohmann::json{"a q2"}, nlohmann::json{"c d"}}) {
    EXPECT_EQ(LoadCode(TinyBpe(merges).dump()), kInvalid) << merges.dump();
  }
  EXPECT_THAT(LoadMessage(TinyBpe({"c d"}).dump()), HasSubstr("\"cd\""));
  EXPECT_THAT(LoadMessage(TinyBpe({"ab"}).dump()), HasSubstr("merges[0]"));

  nlohmann::json json = TinyBpe({"a b"});
  json["model"]["merges"] = "a b";
  EXPECT_EQ(LoadCode(json.dump()), kInvalid);

  json = TinyBpe({"a b"});
  json["model"]["vocab"]["ab"] = -3;
  EXPECT_EQ(LoadCode(json.dump()), kInvalid);

  json = TinyBpe({"a b"});
  json["model"]["vocab"]["ab"] = "x";
  EXPECT_EQ(LoadCode(json.dump()), kInvalid);

  json = TinyBpe({"a b"});
  json["model"]["vocab"]["ab"] = 97;  // same id as "a"
  EXPECT_EQ(LoadCode(json.dump()), kInvalid);

  json = TinyBpe(nlohmann::json::array());
  json["model"]["vocab"].erase(BytesToByteLevel("\n"));
  EXPECT_THAT(LoadMessage(json.dump()), HasSubstr("0x0a"));

  json = TinyBpe(nlohmann::json::array());
  json["pre_tokenizer"] = {{"type", "Metaspace"}};
  EXPECT_EQ(LoadCode(json.dump()), kInvalid);

  json = TinyBpe(nlohmann::json::array());
  json["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(LoadCode(json.dump()), kInvalid);

  json = TinyBpe(nlohmann::json::array());
  json["added_tokens"] =
      nlohmann::json::array({nlohmann::json::object({{"id", 300}})});
  EXPECT_EQ(LoadCode(json.dump()), kInvalid);
}

TEST(BpeTokenizerTest, MissingFileIsNotFound) {
  EXPECT_EQ(Tokenizer::FromFile("/nonexistent/tokenizer.json").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace twice::engine
