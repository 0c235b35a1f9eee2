// WriteRandomModel: deterministic output, the presets' configs, the GPT-2
// tokenizer default, and argument errors.
#include "engine/models/init_model.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/config/based_config.h"
#include "engine/models/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::HasSubstr;
using testing::ReadFileOrEmpty;
using testing::TempDir;

TEST(InitModelTest, SameSeedSameBytesOtherSeedOtherWeights) {
  TempDir tmp;
  ASSERT_OK(testing::WriteTinyModel(tmp.Sub("a"), 5));
  ASSERT_OK(testing::WriteTinyModel(tmp.Sub("b"), 5));
  ASSERT_OK(testing::WriteTinyModel(tmp.Sub("c"), 6));
  for (const char* f :
       {"/model.safetensors", "/config.json", "/tokenizer.json"}) {
    EXPECT_EQ(ReadFileOrEmpty(tmp.Sub("a") + f),
              ReadFileOrEmpty(tmp.Sub("b") + f))
        << f;
  }
  EXPECT_NE(ReadFileOrEmpty(tmp.Sub("a") + "/model.safetensors"),
            ReadFileOrEmpty(tmp.Sub("c") + "/model.safetensors"));
  EXPECT_EQ(ReadFileOrEmpty(tmp.Sub("a") + "/config.json"),
            ReadFileOrEmpty(tmp.Sub("c") + "/config.json"));
}

TEST(InitModelTest, TinyPresetConfig) {
  TempDir tmp;
  ASSERT_OK(testing::WriteTinyModel(tmp.Sub("m"), 1, 300));
  auto c = ParseBasedConfig(ReadFileOrEmpty(tmp.Sub("m") + "/config.json"));
  ASSERT_OK(c);
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->num_layers, 4);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->feature_dim, 16);
  EXPECT_EQ(c->n_inner, 128);
  EXPECT_EQ(c->window_size, 64);
  EXPECT_EQ(c->vocab_size, 300);
  EXPECT_EQ(c->eos_token_id, 299);
  EXPECT_EQ(c->mixer(0), BasedMixerKind::kBaseConv);
  EXPECT_EQ(c->mixer(1), BasedMixerKind::kLinearAttention);
  EXPECT_EQ(c->mixer(2), BasedMixerKind::kSlidingWindow);
  EXPECT_EQ(c->mixer(3), BasedMixerKind::kBaseConv);
}

TEST(InitModelTest, DefaultTokenizerIsGpt2) {
  // Run from the repository root (ctest's working directory).
  InitModelOptions options;
  if (!std::filesystem::exists(options.tokenizer_json)) {
    GTEST_SKIP() << options.tokenizer_json << " not present";
  }
  TempDir tmp;
  options.out_dir = tmp.Sub("gpt2");
  ASSERT_OK(WriteRandomModel(options));
  auto model = LoadModel(options.out_dir);
  ASSERT_OK(model);
  const ModelDescription& d = (*model)->description();
  EXPECT_EQ(d.vocab_size, 50257);
  EXPECT_EQ(d.padded_vocab_size, 50264);
  EXPECT_EQ(d.eos_token_id, 50256);
  auto tokens = (*model)->tokenizer().Encode("Hello world");
  ASSERT_OK(tokens);
  auto state = (*model)->NewState();
  auto logits = (*model)->Prefill(*tokens, *state, PrefillMode::kCausal);
  ASSERT_OK(logits);
  EXPECT_EQ(logits->size(), 50264u);
}

// About 1.45 GB on disk and a few GB of memory: only when asked for.
TEST(InitModelTest, Preset360mShapeLoadsAndRuns) {
  InitModelOptions options;
  if (std::getenv("TWICE_RUN_LARGE_TESTS") == nullptr ||
      !std::filesystem::exists(options.tokenizer_json)) {
    GTEST_SKIP() << "set TWICE_RUN_LARGE_TESTS=1 (needs the GPT-2 tokenizer)";
  }
  TempDir tmp;
  options.out_dir = tmp.Sub("360m");
  options.preset = "360m-shape";
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_OK(WriteRandomModel(options));
  auto t1 = std::chrono::steady_clock::now();
  auto model = LoadModel(options.out_dir);
  ASSERT_OK(model);
  auto t2 = std::chrono::steady_clock::now();
  const ModelDescription& d = (*model)->description();
  EXPECT_EQ(d.num_layers, 27);
  EXPECT_EQ(d.hidden_size, 1024);
  EXPECT_EQ(d.padded_vocab_size, 50264);
  auto state = (*model)->NewState();
  // 5 x 283,920 + 5 x 262,144 + 17 x 4,096 floats (+ tensor headers).
  EXPECT_NEAR(static_cast<double>(state->ByteSize()),
              4.0 * (5 * 283920 + 5 * 262144 + 17 * 4096), 4096.0);
  std::vector<int32_t> prompt = testing::RandomTokens(512, 50257, 1);
  auto logits = (*model)->Prefill(prompt, *state, PrefillMode::kCausal);
  ASSERT_OK(logits);
  auto t3 = std::chrono::steady_clock::now();
  for (int i = 0; i < 8; ++i) ASSERT_TRUE((*model)->Step(i, *state).ok());
  auto t4 = std::chrono::steady_clock::now();
  auto ms = [](auto a, auto b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  std::printf(
      "write %.0f ms, load %.0f ms, prefill 512 %.0f ms, step %.1f ms\n",
      ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t3, t4) / 8);
}

TEST(InitModelTest, RejectsBadOptions) {
  TempDir tmp;
  InitModelOptions options;
  options.out_dir = tmp.Sub("x");
  options.tokenizer_json = tmp.Sub("tok.json");
  testing::WriteFileOrFail(options.tokenizer_json,
                           testing::SmallTokenizerJson(10));
  options.preset = "huge";
  EXPECT_THAT(WriteRandomModel(options).message(), HasSubstr("huge"));
  options.preset = "tiny";
  options.architecture = "mamba3";
  EXPECT_EQ(WriteRandomModel(options).code(),
            absl::StatusCode::kInvalidArgument);
  options.architecture = "based";
  options.out_dir = "";
  EXPECT_EQ(WriteRandomModel(options).code(),
            absl::StatusCode::kInvalidArgument);
  options.out_dir = tmp.Sub("x");
  options.tokenizer_json = tmp.Sub("missing.json");
  EXPECT_EQ(WriteRandomModel(options).code(), absl::StatusCode::kNotFound);
  testing::WriteFileOrFail(tmp.Sub("bad.json"), "{");
  options.tokenizer_json = tmp.Sub("bad.json");
  EXPECT_EQ(WriteRandomModel(options).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::engine
