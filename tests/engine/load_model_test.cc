// LoadModel on model directories that differ from what WriteRandomModel
// produces: name variants upstream checkpoints use ("model." prefix, legacy
// "conv1", explicit lm_head), sharded weights, bf16 weights; and broken
// directories, whose errors must name the file and the tensor.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "engine/models/model.h"
#include "engine/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::ReadAllWeights;
using testing::TempDir;
using testing::WriteAllWeights;

constexpr char kQ[] = "transformer.layers.1.mixer.proj_q.weight";

class LoadModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.Sub("m");
    ASSERT_OK(testing::WriteTinyModel(dir_, 21));
    auto w = ReadAllWeights(Weights());
    ASSERT_OK(w);
    weights_ = *std::move(w);
  }

  std::string Weights() const { return dir_ + "/model.safetensors"; }

  std::vector<float> Logits(const std::string& dir) {
    auto model = testing::LoadOrDie(dir);
    if (model == nullptr) return {};
    auto state = model->NewState();
    auto logits = model->Prefill({5, 6, 7, 8, 9}, *state, PrefillMode::kCausal);
    EXPECT_OK(logits);
    return logits.ok() ? *logits : std::vector<float>{};
  }

  absl::Status LoadStatus() { return LoadModel(dir_).status(); }

  TempDir tmp_;
  std::string dir_;
  std::map<std::string, Tensor> weights_;
};

TEST_F(LoadModelTest, AcceptsUpstreamNameVariants) {
  const std::vector<float> base = Logits(dir_);
  ASSERT_FALSE(base.empty());
  const std::string fingerprint =
      LoadModel(dir_).value()->description().fingerprint;
  std::map<std::string, Tensor> renamed;
  for (const auto& [name, t] : weights_) {
    std::string n =
        "model." + absl::StrReplaceAll(name, {{".conv.", ".conv1."}});
    renamed.emplace(n, t);
  }
  renamed.emplace("model.train_metrics.num-tokens.count", Tensor::Zeros({1}));
  renamed.emplace("lm_head.weight",
                  weights_.at("transformer.embeddings.word_embeddings.weight"));
  ASSERT_OK(WriteAllWeights(Weights(), renamed));
  EXPECT_EQ(Logits(dir_), base);
  // The tied lm_head is an extra weight, so the fingerprint changes.
  EXPECT_NE(LoadModel(dir_).value()->description().fingerprint, fingerprint);
}

TEST_F(LoadModelTest, EmbeddingMayBeStoredOnlyAsLmHead) {
  const std::vector<float> base = Logits(dir_);
  auto w = weights_;
  auto node = w.extract("transformer.embeddings.word_embeddings.weight");
  node.key() = "lm_head.weight";
  w.insert(std::move(node));
  ASSERT_OK(WriteAllWeights(Weights(), w));
  EXPECT_EQ(Logits(dir_), base);
}

TEST_F(LoadModelTest, ReadsShardedWeights) {
  const std::vector<float> base = Logits(dir_);
  const std::string fingerprint =
      LoadModel(dir_).value()->description().fingerprint;
  std::map<std::string, Tensor> a, b;
  std::string index = R"({"metadata": {}, "weight_map": {)";
  bool first = true;
  for (const auto& [name, t] : weights_) {
    const bool in_a = name.find("layers.1") == std::string::npos &&
                      name.find("layers.3") == std::string::npos;
    (in_a ? a : b).emplace(name, t);
    absl::StrAppend(&index, first ? "" : ",", "\"", name, "\": \"",
                    in_a ? "model-1.safetensors" : "model-2.safetensors", "\"");
    first = false;
  }
  index += "}}";
  std::filesystem::remove(Weights());
  ASSERT_OK(WriteAllWeights(dir_ + "/model-1.safetensors", a));
  ASSERT_OK(WriteAllWeights(dir_ + "/model-2.safetensors", b));
  testing::WriteFileOrFail(dir_ + "/model.safetensors.index.json", index);
  EXPECT_EQ(Logits(dir_), base);
  // Same canonical weights, same bytes: same model.
  EXPECT_EQ(LoadModel(dir_).value()->description().fingerprint, fingerprint);

  // A shard name that leaves the directory is refused.
  testing::WriteFileOrFail(dir_ + "/model.safetensors.index.json",
                           R"({"weight_map": {"a": "../x.safetensors"}})");
  EXPECT_THAT(LoadStatus().message(), HasSubstr("invalid shard"));
}

TEST_F(LoadModelTest, ReadsBf16Weights) {
  const std::vector<float> base = Logits(dir_);
  // Hand-written bf16 file (the writer only writes f32): truncate mantissas.
  std::string header = "{";
  std::string data;
  for (const auto& [name, t] : weights_) {
    const size_t begin = data.size();
    for (float x : t.span()) {
      uint32_t bits;
      std::memcpy(&bits, &x, 4);
      const uint16_t hi = static_cast<uint16_t>(bits >> 16);
      data.append(reinterpret_cast<const char*>(&hi), 2);
    }
    absl::StrAppend(&header, header.size() > 1 ? "," : "", "\"", name,
                    "\":{\"dtype\":\"BF16\",\"shape\":[",
                    absl::StrJoin(t.shape(), ","), "],\"data_offsets\":[",
                    begin, ",", data.size(), "]}");
  }
  header += "}";
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  testing::WriteFileOrFail(Weights(), file + header + data);
  const std::vector<float> bf16 = Logits(dir_);
  ASSERT_EQ(bf16.size(), base.size());
  double max_err = 0.0;
  for (size_t i = 0; i < base.size(); ++i) {
    max_err = std::max(max_err, std::abs(double{bf16[i]} - base[i]));
  }
  EXPECT_LT(max_err, 0.02);  // bf16 keeps 8 bits of mantissa
}

TEST_F(LoadModelTest, MissingTensorIsNamed) {
  weights_.erase(kQ);
  ASSERT_OK(WriteAllWeights(Weights(), weights_));
  const absl::Status s = LoadStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(kQ), HasSubstr("[64, 64]"),
                                 HasSubstr("model.safetensors")));
}

TEST_F(LoadModelTest, MisShapedTensorIsNamedWithBothShapes) {
  weights_[kQ] = Tensor::Zeros({32, 64});
  ASSERT_OK(WriteAllWeights(Weights(), weights_));
  const absl::Status s = LoadStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(kQ), HasSubstr("[32, 64]"),
                                 HasSubstr("[64, 64]")));
}

TEST_F(LoadModelTest, MisShapedLmHeadIsRefused) {
  weights_["lm_head.weight"] = Tensor::Zeros({300, 64});
  ASSERT_OK(WriteAllWeights(Weights(), weights_));
  EXPECT_THAT(LoadStatus().message(),
              AllOf(HasSubstr("lm_head.weight"), HasSubstr("[304, 64]")));
}

TEST_F(LoadModelTest, BadSafetensorsHeaderIsNamed) {
  std::string bytes = testing::ReadFileOrEmpty(Weights());
  bytes[10] = '!';  // inside the JSON header
  testing::WriteFileOrFail(Weights(), bytes);
  const absl::Status s = LoadStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("model.safetensors"));
}

TEST_F(LoadModelTest, BadConfigIsInvalidArgumentNamingTheKey) {
  const std::string config = testing::ReadFileOrEmpty(dir_ + "/config.json");
  testing::WriteFileOrFail(
      dir_ + "/config.json",
      absl::StrReplaceAll(config, {{"\"alt_mixer_layers\": [\n    1\n  ]",
                                    "\"alt_mixer_layers\": [9]"}}));
  absl::Status s = LoadStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("config.json"), HasSubstr("alt_mixer_layers")));
  testing::WriteFileOrFail(dir_ + "/config.json", "{\"n_embd\": 64");
  EXPECT_EQ(LoadStatus().code(), absl::StatusCode::kInvalidArgument);
  // A config whose width disagrees with the weights names a tensor.
  testing::WriteFileOrFail(
      dir_ + "/config.json",
      absl::StrReplaceAll(config, {{"\"n_embd\": 64", "\"n_embd\": 32"}}));
  EXPECT_THAT(LoadStatus().message(), HasSubstr("expected"));
}

TEST_F(LoadModelTest, MissingFilesAreNotFound) {
  std::filesystem::remove(dir_ + "/tokenizer.json");
  EXPECT_EQ(LoadStatus().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(LoadStatus().message(), HasSubstr("tokenizer.json"));
  std::filesystem::remove(Weights());
  testing::WriteFileOrFail(dir_ + "/tokenizer.json",
                           testing::SmallTokenizerJson(300));
  EXPECT_EQ(LoadStatus().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadModel(tmp_.Sub("nothing")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(LoadModelTest, TokenizerLargerThanEmbeddingIsRefused) {
  testing::WriteFileOrFail(dir_ + "/tokenizer.json",
                           testing::SmallTokenizerJson(305));
  const absl::Status s = LoadStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("305"));
  // An eos_token_id the tokenizer does not have is refused.
  testing::WriteFileOrFail(dir_ + "/tokenizer.json",
                           testing::SmallTokenizerJson(200));
  EXPECT_THAT(LoadStatus().message(), HasSubstr("eos_token_id"));
  // A tokenizer smaller than the config's vocabulary is fine: its size is
  // the accepted vocabulary.
  testing::WriteFileOrFail(dir_ + "/tokenizer.json",
                           testing::SmallTokenizerJson(300));
  const std::string config = testing::ReadFileOrEmpty(dir_ + "/config.json");
  testing::WriteFileOrFail(
      dir_ + "/config.json",
      absl::StrReplaceAll(config,
                          {{"\"vocab_size\": 300", "\"vocab_size\": 302"}}));
  auto model = LoadModel(dir_);
  ASSERT_OK(model);
  EXPECT_EQ((*model)->description().vocab_size, 300);
  EXPECT_EQ((*model)->description().padded_vocab_size, 304);
  auto state = (*model)->NewState();
  EXPECT_EQ((*model)->Step(301, *state).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::engine
