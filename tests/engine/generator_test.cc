// Generate's loop and streaming, over a small deterministic model written
// for this test: it emits a fixed script of tokens, one per position, and
// then its end-of-sequence token. The tokenizer is the real GPT-2 one, so
// the pieces carry real byte-level text.
#include "engine/runtime/generator.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/models/model.h"
#include "engine/state/layer_state.h"
#include "engine/state/sequence_state.h"
#include "engine/tokenizer/byte_level_alphabet.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr int32_t kEos = 50256;
constexpr int kPadding = 7;  // logits rows past the vocabulary

// Remembers every token the model has read.
class ScriptState final : public LayerState {
 public:
  std::string_view kind() const override { return "test_script"; }
  int64_t ByteSize() const override {
    return static_cast<int64_t>(read.size() * sizeof(int32_t));
  }
  std::unique_ptr<LayerState> Clone() const override {
    return std::make_unique<ScriptState>(*this);
  }
  void Serialize(StateWriter& writer) const override {}
  absl::Status Deserialize(StateReader& reader) override {
    return absl::UnimplementedError("test state is not serialized");
  }

  std::vector<int32_t> read;
  size_t prompt_size = 0;
};

// After reading the prompt and i generated tokens, favours script[i], then
// kEos once the script is used up. Padding rows get the largest logits, so
// a generator that samples past vocab_size would be caught.
class ScriptModel final : public Model {
 public:
  ScriptModel(const Tokenizer& tokenizer, std::vector<int32_t> script)
      : tokenizer_(tokenizer), script_(std::move(script)) {
    description_.architecture = "test_script";
    description_.fingerprint = "test";
    description_.vocab_size = tokenizer.vocab_size();
    description_.padded_vocab_size = tokenizer.vocab_size() + kPadding;
    description_.eos_token_id = kEos;
    description_.num_layers = 1;
  }

  const ModelDescription& description() const override { return description_; }
  const Tokenizer& tokenizer() const override { return tokenizer_; }

  std::unique_ptr<SequenceState> NewState() const override {
    std::vector<std::unique_ptr<LayerState>> layers;
    layers.push_back(std::make_unique<ScriptState>());
    return std::make_unique<SequenceState>(description_.fingerprint,
                                           std::move(layers));
  }

  absl::StatusOr<std::vector<float>> Prefill(absl::Span<const int32_t> tokens,
                                             SequenceState& state,
                                             PrefillMode mode) const override {
    if (tokens.empty()) return absl::InvalidArgumentError("no tokens");
    for (const int32_t t : tokens) {
      if (t < 0 || t >= description_.vocab_size) {
        return absl::InvalidArgumentError("token out of range");
      }
    }
    ScriptState& s = Layer(state);
    if (s.read.empty()) s.prompt_size = tokens.size();
    s.read.insert(s.read.end(), tokens.begin(), tokens.end());
    state.set_token_count(static_cast<int64_t>(s.read.size()));
    return Logits(s);
  }

  absl::StatusOr<std::vector<float>> Step(int32_t token,
                                          SequenceState& state) const override {
    return Prefill(absl::MakeConstSpan(&token, 1), state, PrefillMode::kCausal);
  }

  static ScriptState& Layer(SequenceState& state) {
    return static_cast<ScriptState&>(state.layer(0));
  }

 private:
  std::vector<float> Logits(const ScriptState& s) const {
    std::vector<float> logits(description_.padded_vocab_size, 0.0f);
    const size_t i = s.read.size() - s.prompt_size;
    logits[i < script_.size() ? script_[i] : kEos] = 10.0f;
    for (int p = 0; p < kPadding; ++p) {
      logits[description_.vocab_size + p] = 100.0f;
    }
    return logits;
  }

  const Tokenizer& tokenizer_;
  std::vector<int32_t> script_;
  ModelDescription description_;
};

const Tokenizer& Gpt2() {
  static const Tokenizer* const tokenizer = [] {
    auto t = Tokenizer::FromFile("models/tokenizers/gpt2/tokenizer.json");
    EXPECT_OK(t);
    return t.ok() ? t->release() : nullptr;
  }();
  return *tokenizer;
}

std::vector<int32_t> Encode(std::string_view text) {
  auto ids = Gpt2().Encode(text);
  EXPECT_OK(ids);
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

// One token per byte, so multi-byte characters are split across tokens.
std::vector<int32_t> ByteTokens(std::string_view text) {
  std::vector<int32_t> ids;
  for (const char c : text) {
    ids.push_back(
        Gpt2().TokenToId(BytesToByteLevel(std::string(1, c))).value());
  }
  return ids;
}

struct Outcome {
  absl::StatusOr<GenerateResult> result;
  std::vector<GeneratedPiece> pieces;
  std::vector<int32_t> read;  // tokens the model read

  std::string Text() const {
    std::string text;
    for (const GeneratedPiece& p : pieces) text += p.text;
    return text;
  }
  std::vector<int32_t> Tokens() const {
    std::vector<int32_t> tokens;
    for (const GeneratedPiece& p : pieces) {
      tokens.insert(tokens.end(), p.tokens.begin(), p.tokens.end());
    }
    return tokens;
  }
};

// Cancels after `cancel_after` pieces when it is >= 0.
Outcome RunScript(const std::vector<int32_t>& script,
                  const GenerateOptions& options,
                  std::vector<int32_t> prompt = {464}, int cancel_after = -1) {
  ScriptModel model(Gpt2(), script);
  std::unique_ptr<SequenceState> state = model.NewState();
  Outcome run;
  run.result = Generate(
      model, *state, prompt, options, [&](const GeneratedPiece& piece) {
        run.pieces.push_back(piece);
        return cancel_after < 0 ||
               static_cast<int>(run.pieces.size()) < cancel_after;
      });
  run.read = ScriptModel::Layer(*state).read;
  return run;
}

GenerateOptions Options(int32_t max_tokens,
                        std::vector<std::string> stop = {}) {
  GenerateOptions options;
  options.max_tokens = max_tokens;
  options.stop = std::move(stop);
  return options;
}

TEST(GeneratorTest, StopsAtMaxTokens) {
  const std::vector<int32_t> script = Encode(" quick brown fox jumps over");
  ASSERT_GE(script.size(), 5u);
  const Outcome run = RunScript(script, Options(3), {464, 2068});
  ASSERT_OK(run.result);
  EXPECT_EQ(run.result->finish_reason, "length");
  EXPECT_EQ(run.result->tokens_prefilled, 2);
  EXPECT_EQ(run.result->tokens_decoded, 3);
  EXPECT_THAT(run.Tokens(), ElementsAre(script[0], script[1], script[2]));
  EXPECT_EQ(run.Text(), " quick brown fox");
  // The last sampled token is never stepped.
  EXPECT_THAT(run.read, ElementsAre(464, 2068, script[0], script[1]));
}

TEST(GeneratorTest, OneTokenPerPiece) {
  const std::vector<int32_t> script = Encode(" a b c");
  const Outcome run = RunScript(script, Options(3));
  ASSERT_OK(run.result);
  ASSERT_EQ(run.pieces.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_THAT(run.pieces[i].tokens, ElementsAre(script[i]));
  }
  EXPECT_EQ(run.pieces[0].text, " a");
}

TEST(GeneratorTest, StopsAtEos) {
  const std::vector<int32_t> script = Encode(" hello there");
  const Outcome run = RunScript(script, Options(50));
  ASSERT_OK(run.result);
  EXPECT_EQ(run.result->finish_reason, "eos");
  EXPECT_EQ(run.result->tokens_decoded, static_cast<int64_t>(script.size()));
  EXPECT_EQ(run.Tokens(), script);  // the end token is not returned
  EXPECT_EQ(run.Text(), " hello there");
}

TEST(GeneratorTest, IgnoresEosWhenAsked) {
  const std::vector<int32_t> script = Encode(" hi");
  GenerateOptions options = Options(3);
  options.stop_at_eos = false;
  const Outcome run = RunScript(script, options);
  ASSERT_OK(run.result);
  EXPECT_EQ(run.result->finish_reason, "length");
  EXPECT_THAT(run.Tokens(), ElementsAre(script[0], kEos, kEos));
  EXPECT_EQ(run.Text(), " hi<|endoftext|><|endoftext|>");
}

TEST(GeneratorTest, StopStringIsCutAndNotReturned) {
  const std::vector<int32_t> script = Encode(" one two. END three four");
  const Outcome run = RunScript(script, Options(50, {" END"}));
  ASSERT_OK(run.result);
  EXPECT_EQ(run.result->finish_reason, "stop");
  EXPECT_EQ(run.Text(), " one two.");
  // Generation ends on the token that completes the stop string.
  EXPECT_EQ(run.Tokens(), Encode(" one two. END"));
}

TEST(GeneratorTest, StopStringInsideAToken) {
  // "ab" sits inside the single token " cabbage"; the text before it stays.
  const std::vector<int32_t> script = Encode(" x cabbage y");
  const Outcome run = RunScript(script, Options(50, {"ab"}));
  ASSERT_OK(run.result);
  EXPECT_EQ(run.result->finish_reason, "stop");
  EXPECT_EQ(run.Text(), " x c");
}

TEST(GeneratorTest, EarliestStopStringWins) {
  const std::vector<int32_t> script = Encode(" alpha beta gamma");
  const Outcome run = RunScript(script, Options(50, {"gamma", "beta", "zzz"}));
  ASSERT_OK(run.result);
  EXPECT_EQ(run.result->finish_reason, "stop");
  EXPECT_EQ(run.Text(), " alpha ");
}

TEST(GeneratorTest, PossibleStopPrefixIsHeldThenReleased) {
  // " Hello" could begin the stop string " Hello there"; it is held until
  // " world" rules that out.
  const std::vector<int32_t> script = Encode(" Hello world");
  ASSERT_EQ(script.size(), 2u);
  const Outcome run = RunScript(script, Options(50, {" Hello there"}));
  ASSERT_OK(run.result);
  EXPECT_EQ(run.result->finish_reason, "eos");
  ASSERT_GE(run.pieces.size(), 2u);
  EXPECT_EQ(run.pieces[0].text, "");
  EXPECT_EQ(run.pieces[1].text, " Hello world");
  EXPECT_EQ(run.Text(), " Hello world");
}

TEST(GeneratorTest, HeldTextIsFlushedAtTheEnd) {
  // The text ends in " wor", a prefix of the stop string " world": it
  // comes out once nothing more can follow, at the end token or the limit.
  const std::vector<int32_t> script = Encode(" Hello wor");
  const Outcome at_eos = RunScript(script, Options(50, {" world"}));
  ASSERT_OK(at_eos.result);
  EXPECT_EQ(at_eos.result->finish_reason, "eos");
  EXPECT_EQ(at_eos.Text(), " Hello wor");

  const Outcome at_limit = RunScript(
      script, Options(static_cast<int32_t>(script.size()), {" world"}));
  ASSERT_OK(at_limit.result);
  EXPECT_EQ(at_limit.result->finish_reason, "length");
  EXPECT_EQ(at_limit.Text(), " Hello wor");
}

bool IsWholeUtf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = ReadUtf8Char(text, pos);
    if (c.kind != Utf8Char::Kind::kValid) return false;
    pos += c.length;
  }
  return true;
}

TEST(GeneratorTest, Utf8IsNeverSplitAcrossPieces) {
  const std::string text = "héllo 日本語 🍕👍🏽 ok";
  const std::vector<int32_t> script = ByteTokens(text);
  const Outcome run = RunScript(script, Options(100));
  ASSERT_OK(run.result);
  EXPECT_EQ(run.result->finish_reason, "eos");
  EXPECT_EQ(run.Text(), text);
  EXPECT_EQ(run.Tokens(), script);
  for (const GeneratedPiece& piece : run.pieces) {
    EXPECT_TRUE(IsWholeUtf8(piece.text)) << piece.text;
  }
}

TEST(GeneratorTest, Utf8AndStopStringTogether) {
  // The stop string starts with a multi-byte character that arrives one
  // byte per token.
  const std::vector<int32_t> script = ByteTokens("naïve 日本 rest");
  const Outcome run = RunScript(script, Options(100, {"日本"}));
  ASSERT_OK(run.result);
  EXPECT_EQ(run.result->finish_reason, "stop");
  EXPECT_EQ(run.Text(), "naïve ");
  for (const GeneratedPiece& piece : run.pieces) {
    EXPECT_TRUE(IsWholeUtf8(piece.text)) << piece.text;
  }
}

TEST(GeneratorTest, InvalidUtf8IsStillDelivered) {
  // A stray byte can never become whole; it is not held back forever.
  const std::vector<int32_t> script = ByteTokens(
      "a\xff"
      "b");
  const Outcome run = RunScript(script, Options(3));
  ASSERT_OK(run.result);
  ASSERT_EQ(run.pieces.size(), 3u);
  EXPECT_EQ(run.pieces[1].text, "\xff");
  EXPECT_EQ(run.Text(),
            "a\xff"
            "b");
}

TEST(GeneratorTest, CallbackCancels) {
  const std::vector<int32_t> script = Encode(" one two three four five");
  const Outcome run = RunScript(script, Options(50), {464}, /*cancel_after=*/2);
  ASSERT_OK(run.result);
  EXPECT_EQ(run.result->finish_reason, "cancelled");
  EXPECT_EQ(run.result->tokens_decoded, 2);
  EXPECT_EQ(run.pieces.size(), 2u);
  // Nothing is read after the cancelling piece.
  EXPECT_THAT(run.read, ElementsAre(464, script[0]));
}

TEST(GeneratorTest, CancelOnFinalPieceKeepsReason) {
  const std::vector<int32_t> script = Encode(" one two three");
  const Outcome run = RunScript(script, Options(2), {464}, /*cancel_after=*/2);
  ASSERT_OK(run.result);
  EXPECT_EQ(run.result->finish_reason, "length");
}

TEST(GeneratorTest, SamplesWithSeedReproducibly) {
  // With temperature the script's token still dominates (10 vs 0 logits,
  // 50k alternatives), but the point is that two runs agree.
  GenerateOptions options = Options(5);
  options.sampling.temperature = 1.0f;
  options.sampling.seed = 17;
  const std::vector<int32_t> script = Encode(" a b c d e");
  const Outcome first = RunScript(script, options);
  const Outcome second = RunScript(script, options);
  ASSERT_OK(first.result);
  ASSERT_OK(second.result);
  EXPECT_EQ(first.Tokens(), second.Tokens());
  for (const int32_t t : first.Tokens()) EXPECT_LT(t, Gpt2().vocab_size());
}

TEST(GeneratorTest, RejectsBadRequests) {
  const std::vector<int32_t> script = Encode(" x");
  EXPECT_EQ(RunScript(script, Options(5), {}).result.status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunScript(script, Options(0)).result.status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunScript(script, Options(5, {""})).result.status().code(),
            absl::StatusCode::kInvalidArgument);
  GenerateOptions bad_sampling = Options(5);
  bad_sampling.sampling.top_p = 0.0f;
  EXPECT_EQ(RunScript(script, bad_sampling).result.status().code(),
            absl::StatusCode::kInvalidArgument);
  // A model error comes back as it is.
  EXPECT_EQ(RunScript(script, Options(5), {-4}).result.status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GeneratorTest, EmptyPromptReadsNothing) {
  const Outcome run = RunScript(Encode(" x"), Options(5), {});
  EXPECT_FALSE(run.result.ok());
  EXPECT_TRUE(run.read.empty());
  EXPECT_TRUE(run.pieces.empty());
}

}  // namespace
}  // namespace twice::engine
