// `twice init-model --arch=mamba2` (engine/models/init_mamba2.h): the tiny
// preset loads as a Mamba-2 model with the tokenizer's vocabulary padded to
// 16, its chunked prefill agrees with its recurrent steps, and unknown
// presets are refused by name.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/init_model.h"
#include "engine/models/mamba2_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/golden_util.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

TEST(Mamba2InitTest, TinyPresetLoadsAndChunkedEqualsRecurrent) {
  TempDir tmp;
  InitModelOptions options;
  options.architecture = "mamba2";
  options.out_dir = tmp.Sub("m");
  options.tokenizer_json = tmp.Sub("tok.json");
  testing::WriteFileOrFail(options.tokenizer_json,
                           testing::SmallTokenizerJson(300));
  options.seed = 5;
  ASSERT_OK(WriteRandomModel(options));
  std::unique_ptr<Model> model = testing::LoadOrDie(options.out_dir);
  ASSERT_NE(model, nullptr);
  const ModelDescription& d = model->description();
  EXPECT_EQ(d.architecture, "mamba2");
  EXPECT_EQ(d.vocab_size, 300);
  EXPECT_EQ(d.padded_vocab_size, 304);
  EXPECT_EQ(d.eos_token_id, 299);
  EXPECT_EQ(d.prefix_length, 0);
  EXPECT_EQ(d.num_layers, 2);
  EXPECT_EQ(d.hidden_size, 64);
  const auto& m = static_cast<const Mamba2Model&>(*model);
  EXPECT_EQ(m.config().chunk_size, 64);
  // 2 layers · ((4-1)·(128 + 2·16) + 8·16·16) f32.
  EXPECT_EQ(m.StatePayloadBytes(), 2 * (3 * 160 + 8 * 16 * 16) * 4);

  // 150 tokens: two full SSD chunks and a ragged one.
  const std::vector<int32_t> tokens = testing::RandomTokens(150, 300, 9);
  auto chunked = model->NewState();
  auto logits = model->Prefill(tokens, *chunked, PrefillMode::kCausal);
  ASSERT_OK(logits);
  auto recurrent = model->NewState();
  std::vector<float> last;
  for (int32_t t : tokens) {
    auto step = model->Step(t, *recurrent);
    ASSERT_OK(step);
    last = *std::move(step);
  }
  EXPECT_LE(testing::RelativeError(last, *logits), 1e-5);

  // Same seed, same bytes.
  options.out_dir = tmp.Sub("again");
  ASSERT_OK(WriteRandomModel(options));
  EXPECT_EQ(testing::ReadFileOrEmpty(tmp.Sub("m/model.safetensors")),
            testing::ReadFileOrEmpty(tmp.Sub("again/model.safetensors")));
}

TEST(Mamba2InitTest, UnknownPresetIsRefused) {
  TempDir tmp;
  InitModelOptions options;
  options.architecture = "mamba2";
  options.preset = "360m-shape";
  options.out_dir = tmp.Sub("m");
  options.tokenizer_json = tmp.Sub("tok.json");
  testing::WriteFileOrFail(options.tokenizer_json,
                           testing::SmallTokenizerJson(10));
  const absl::Status s = WriteRandomModel(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("mamba2-130m-shape"));
}

}  // namespace
}  // namespace twice::engine
