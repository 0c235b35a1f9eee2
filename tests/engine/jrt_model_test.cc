// JRT-RNN invariants on the tiny random JRT model (d 64, layers conv /
// prefix linear attention / sliding window (left extent 32) / conv, encoder
// length M = 64, 300-token WordLevel vocabulary padded to 304), weights
// sharpened x10 so masking and attention patterns show:
//   - the padding rule: N < M is left-padded to M with token 220 and the pads
//     are masked only in prefix linear attention (raw keys zeroed), the
//     state's token count includes them;
//   - decoding after a prefix read is plain recurrent decoding of the merged
//     state: prefix(a) then step(b) == prefix(a + b) once |a| >= M, and
//     steps == a causal prefill;
//   - Read-2x equals a prefix read of the repeated tokens;
//   - codec round trip of a JRT state; prefix reads refuse non-empty states;
//     a Based model has no prefix encoder.
// Tolerance: logits agree to 2e-5 absolute + 1e-4 relative.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "engine/state/state_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::HasSubstr;
using testing::LoadOrDie;
using testing::RandomTokens;
using testing::TempDir;

constexpr int kVocab = 300;
constexpr int kEncoder = 64;
constexpr int32_t kPad = 220;

absl::Status WriteTinyJrt(const std::string& dir, uint64_t seed) {
  return testing::WriteTinyModelOf("jrt", dir, seed, kVocab);
}

// Zeroes the key projections (decoder and encoder) of every prefix linear
// attention layer: then every raw key is 0 and the pad mask changes nothing.
absl::Status ZeroPlaKeys(const std::string& dir) {
  const std::string path = dir + "/model.safetensors";
  auto w = testing::ReadAllWeights(path);
  if (!w.ok()) return w.status();
  for (auto& [name, t] : *w) {
    if (name.ends_with("mixer.proj_k.weight") ||
        name.ends_with("mixer.proj_k_enc.weight")) {
      for (float& x : t.mutable_span()) x = 0.0f;
    }
  }
  return testing::WriteAllWeights(path, *w);
}

double MaxError(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(double{got[i]} - want[i]) -
                                1e-4 * std::abs(double{want[i]}));
  }
  return worst;
}

void ExpectLogitsNear(const std::vector<float>& got,
                      const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  EXPECT_LE(MaxError(got, want), 2e-5) << what;
}

std::vector<int32_t> Cat(const std::vector<int32_t>& a,
                         const std::vector<int32_t>& b) {
  std::vector<int32_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

std::vector<int32_t> Slice(const std::vector<int32_t>& v, int begin, int end) {
  return std::vector<int32_t>(v.begin() + begin, v.begin() + end);
}

class JrtModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ASSERT_OK(WriteTinyJrt(dir_->Sub("jrt"), 11));
    ASSERT_OK(testing::SharpenWeights(dir_->Sub("jrt"), 10.0f));
    model_ = LoadOrDie(dir_->Sub("jrt")).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete dir_;
  }

  static std::vector<float> Read(
      const Model& model, const std::vector<int32_t>& tokens, PrefillMode mode,
      std::unique_ptr<SequenceState>* out = nullptr) {
    auto state = model.NewState();
    auto logits = model.Prefill(tokens, *state, mode);
    EXPECT_OK(logits);
    if (out != nullptr) *out = std::move(state);
    return logits.ok() ? *logits : std::vector<float>{};
  }

  static TempDir* dir_;
  static Model* model_;
};

TempDir* JrtModelTest::dir_ = nullptr;
Model* JrtModelTest::model_ = nullptr;

TEST_F(JrtModelTest, DescribesItself) {
  const ModelDescription& d = model_->description();
  EXPECT_EQ(d.architecture, "jrt");
  EXPECT_EQ(d.prefix_length, kEncoder);
  EXPECT_EQ(d.num_layers, 4);
  EXPECT_EQ(d.padded_vocab_size, 304);
  auto state = model_->NewState();
  EXPECT_EQ(state->layer(0).kind(), "short_conv");
  // Same state layout as Based: the encoder is merged, never kept.
  EXPECT_EQ(state->layer(1).kind(), "linear_attention");
  EXPECT_EQ(state->layer(2).kind(), "sliding_window");
  TempDir based_dir;
  ASSERT_OK(testing::WriteTinyModel(based_dir.Sub("m"), 11, kVocab));
  std::unique_ptr<Model> based = LoadOrDie(based_dir.Sub("m"));
  EXPECT_EQ(based->description().prefix_length, 0);
  EXPECT_EQ(state->ByteSize(), based->NewState()->ByteSize());
}

TEST_F(JrtModelTest, ShortReadsAreLeftPaddedToTheEncoderLength) {
  for (int n : {1, 20, kEncoder - 1}) {
    const std::vector<int32_t> a = RandomTokens(n, kVocab, 30 + n);
    std::unique_ptr<SequenceState> state;
    const std::vector<float> padded =
        Read(*model_, a, PrefillMode::kPrefix, &state);
    // The pads count: decoding continues at position M.
    EXPECT_EQ(state->token_count(), kEncoder) << n;
    // The same tokens spelled out, read without padding (nothing masked):
    // only the mask differs, and it matters.
    const std::vector<int32_t> spelled =
        Cat(std::vector<int32_t>(kEncoder - n, kPad), a);
    const std::vector<float> unmasked =
        Read(*model_, spelled, PrefillMode::kPrefix);
    EXPECT_GT(MaxError(padded, unmasked), 1e-3) << n;
  }
  const std::vector<int32_t> exact = RandomTokens(kEncoder, kVocab, 40);
  std::unique_ptr<SequenceState> state;
  Read(*model_, exact, PrefillMode::kPrefix, &state);
  EXPECT_EQ(state->token_count(), kEncoder);
  const std::vector<int32_t> longer = RandomTokens(kEncoder + 9, kVocab, 41);
  Read(*model_, longer, PrefillMode::kPrefix, &state);
  EXPECT_EQ(state->token_count(), kEncoder + 9);
  // Unpadded: a short read is its own encoder.
  Read(*model_, Slice(longer, 0, 20), PrefillMode::kPrefixUnpadded, &state);
  EXPECT_EQ(state->token_count(), 20);
}

TEST_F(JrtModelTest, PadsAre220AndTheMaskOnlyZeroesLinearAttentionKeys) {
  // With every prefix linear-attention key projection zero, masking keys is
  // a no-op, so a padded read must equal reading 220 x (M - N) + tokens
  // without padding bit for bit: same pad token, same positions, and pads
  // processed as ordinary tokens everywhere else (values included).
  TempDir dir;
  ASSERT_OK(WriteTinyJrt(dir.Sub("m"), 12));
  ASSERT_OK(testing::SharpenWeights(dir.Sub("m"), 10.0f));
  ASSERT_OK(ZeroPlaKeys(dir.Sub("m")));
  std::unique_ptr<Model> model = LoadOrDie(dir.Sub("m"));
  for (int n : {1, 25, kEncoder - 1}) {
    const std::vector<int32_t> a = RandomTokens(n, kVocab, 50 + n);
    std::unique_ptr<SequenceState> padded_state, spelled_state;
    const std::vector<float> padded =
        Read(*model, a, PrefillMode::kPrefix, &padded_state);
    const std::vector<float> spelled =
        Read(*model, Cat(std::vector<int32_t>(kEncoder - n, kPad), a),
             PrefillMode::kPrefixUnpadded, &spelled_state);
    EXPECT_EQ(padded, spelled) << n;
    EXPECT_EQ(EncodeState(*padded_state), EncodeState(*spelled_state)) << n;
    // Another pad token would give other logits.
    const std::vector<float> other =
        Read(*model, Cat(std::vector<int32_t>(kEncoder - n, kPad + 1), a),
             PrefillMode::kPrefixUnpadded);
    EXPECT_NE(padded, other) << n;
  }
}

TEST_F(JrtModelTest, DecodingAfterThePrefixIsRecurrentDecoding) {
  const std::vector<int32_t> tokens = RandomTokens(120, kVocab, 60);
  // |a| >= M: b enters only causally, in a single prefix read or after it.
  for (int split : {kEncoder, kEncoder + 1, 90}) {
    std::unique_ptr<SequenceState> state;
    Read(*model_, Slice(tokens, 0, split), PrefillMode::kPrefix, &state);
    for (int i = split; i < split + 12; ++i) {
      auto stepped = model_->Step(tokens[i], *state);
      ASSERT_OK(stepped);
      ExpectLogitsNear(
          *stepped,
          Read(*model_, Slice(tokens, 0, i + 1), PrefillMode::kPrefix),
          "prefix " + std::to_string(split) + " step to " +
              std::to_string(i + 1));
    }
    std::unique_ptr<SequenceState> again;
    Read(*model_, Slice(tokens, 0, split), PrefillMode::kPrefix, &again);
    auto rest = model_->Prefill(Slice(tokens, split, 120), *again,
                                PrefillMode::kCausal);
    ASSERT_OK(rest);
    ExpectLogitsNear(*rest, Read(*model_, tokens, PrefillMode::kPrefix),
                     "prefix " + std::to_string(split) + " + causal rest");
  }
  // |a| < M (padded) and = M: steps equal a causal prefill of the same tokens.
  for (int n : {10, kEncoder}) {
    std::unique_ptr<SequenceState> stepped, prefilled;
    Read(*model_, Slice(tokens, 0, n), PrefillMode::kPrefix, &stepped);
    Read(*model_, Slice(tokens, 0, n), PrefillMode::kPrefix, &prefilled);
    std::vector<float> last;
    for (int i = n; i < n + 20; ++i) {
      auto logits = model_->Step(tokens[i], *stepped);
      ASSERT_OK(logits);
      last = *logits;
    }
    auto causal = model_->Prefill(Slice(tokens, n, n + 20), *prefilled,
                                  PrefillMode::kCausal);
    ASSERT_OK(causal);
    ExpectLogitsNear(last, *causal, "n " + std::to_string(n));
    EXPECT_EQ(stepped->token_count(), std::max(n, kEncoder) + 20);
  }
}

TEST_F(JrtModelTest, LongPrefixReadsAreChunkedExactly) {
  // Beyond the 1024-token internal chunk: the encoder stays in the first
  // chunk and the rest is causal, as when the caller splits the read.
  const std::vector<int32_t> tokens = RandomTokens(1100, kVocab, 70);
  const std::vector<float> whole = Read(*model_, tokens, PrefillMode::kPrefix);
  std::unique_ptr<SequenceState> state;
  Read(*model_, Slice(tokens, 0, 700), PrefillMode::kPrefix, &state);
  auto rest =
      model_->Prefill(Slice(tokens, 700, 1100), *state, PrefillMode::kCausal);
  ASSERT_OK(rest);
  ExpectLogitsNear(*rest, whole, "1100 as prefix 700 + causal 400");
}

TEST_F(JrtModelTest, ReadTwiceIsAPrefixReadOfTheRepeatedTokens) {
  for (int n : {5, 20, 40}) {  // 2n < M (padded) and 2n > M
    const std::vector<int32_t> a = RandomTokens(n, kVocab, 80 + n);
    std::unique_ptr<SequenceState> twice, repeated;
    const std::vector<float> got =
        Read(*model_, a, PrefillMode::kPrefixReadTwice, &twice);
    const std::vector<float> want =
        Read(*model_, Cat(a, a), PrefillMode::kPrefix, &repeated);
    EXPECT_EQ(got, want) << n;
    EXPECT_EQ(EncodeState(*twice), EncodeState(*repeated)) << n;
    EXPECT_EQ(twice->token_count(), std::max(2 * n, kEncoder)) << n;
    // And it is not the single read.
    EXPECT_GT(MaxError(got, Read(*model_, a, PrefillMode::kPrefix)), 1e-3);
  }
}

TEST_F(JrtModelTest, StateRoundTripsThroughTheCodec) {
  for (int n : {20, 100}) {
    std::unique_ptr<SequenceState> state;
    Read(*model_, RandomTokens(n, kVocab, 90 + n), PrefillMode::kPrefix,
         &state);
    const std::string blob = EncodeState(*state);
    auto restored = model_->NewState();
    ASSERT_OK(DecodeStateInto(blob, *restored));
    EXPECT_EQ(restored->token_count(), std::max(n, kEncoder));
    EXPECT_EQ(EncodeState(*restored), blob);
    auto a = model_->Step(17, *state);
    auto b = model_->Step(17, *restored);
    ASSERT_OK(a);
    ASSERT_OK(b);
    EXPECT_EQ(*a, *b);
  }
}

TEST_F(JrtModelTest, PrefixReadsNeedAnEmptyState) {
  auto state = model_->NewState();
  ASSERT_TRUE(
      model_->Prefill(RandomTokens(5, kVocab, 1), *state, PrefillMode::kCausal)
          .ok());
  const std::string before = EncodeState(*state);
  for (PrefillMode mode : {PrefillMode::kPrefix, PrefillMode::kPrefixReadTwice,
                           PrefillMode::kPrefixUnpadded}) {
    auto p = model_->Prefill({1, 2, 3}, *state, mode);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(p.status().message(), HasSubstr("empty state"));
    EXPECT_THAT(p.status().message(), HasSubstr("5 tokens"));
    EXPECT_EQ(EncodeState(*state), before);
  }
  // Out-of-vocabulary tokens are refused before anything is padded.
  auto empty = model_->NewState();
  EXPECT_EQ(model_->Prefill({1, kVocab}, *empty, PrefillMode::kPrefix)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(empty->token_count(), 0);
}

TEST_F(JrtModelTest, BasedModelsHaveNoPrefixEncoder) {
  TempDir dir;
  ASSERT_OK(testing::WriteTinyModel(dir.Sub("m"), 3, kVocab));
  std::unique_ptr<Model> based = LoadOrDie(dir.Sub("m"));
  for (PrefillMode mode : {PrefillMode::kPrefix, PrefillMode::kPrefixReadTwice,
                           PrefillMode::kPrefixUnpadded}) {
    auto state = based->NewState();
    auto p = based->Prefill({1, 2, 3}, *state, mode);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(p.status().message(), HasSubstr("no prefix encoder"));
    EXPECT_THAT(p.status().message(), HasSubstr("JRT-RNN"));
    EXPECT_EQ(state->token_count(), 0);
  }
}

}  // namespace
}  // namespace twice::engine
