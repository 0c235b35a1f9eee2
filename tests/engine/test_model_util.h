// Helpers for engine tests that need a real model directory: a temporary
// directory, a small WordLevel tokenizer.json, the tiny random Based model
// written by WriteRandomModel, and whole-file weight rewrites (to make
// weights sharper, drop or reshape a tensor, rename, convert to bf16).
#ifndef TWICE_TESTS_ENGINE_TEST_MODEL_UTIL_H_
#define TWICE_TESTS_ENGINE_TEST_MODEL_UTIL_H_

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/safetensors.h"
#include "engine/weights/safetensors_writer.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace twice::engine::testing {

// The suite's scratch directory (tests/testing/temp_dir.h).
using ::twice::testing::TempDir;

inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return std::move(buf).str();
}

inline void WriteFileOrFail(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// WordLevel vocabulary "[UNK]" = 0, "w1" .. "w<vocab-2>", and
// "<|endoftext|>" = vocab - 1.
inline std::string SmallTokenizerJson(int vocab) {
  std::string v = "{\"[UNK]\": 0";
  for (int i = 1; i < vocab - 1; ++i)
    absl::StrAppend(&v, ", \"w", i, "\": ", i);
  absl::StrAppend(&v, ", \"<|endoftext|>\": ", vocab - 1, "}");
  return absl::StrCat(R"({"version": "1.0", "added_tokens": [{"id": )",
                      vocab - 1,
                      R"(, "content": "<|endoftext|>", "special": true}],
      "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"},
      "decoder": null,
      "model": {"type": "WordLevel", "unk_token": "[UNK]", "vocab": )",
                      v, "}}");
}

// Writes the "tiny" preset with a `vocab`-token WordLevel tokenizer into
// `dir` (created).
inline absl::Status WriteTinyModel(const std::string& dir, uint64_t seed,
                                   int vocab = 300) {
  std::filesystem::create_directories(dir);
  const std::string tok = dir + ".tokenizer.json";
  {
    std::ofstream out(tok, std::ios::binary | std::ios::trunc);
    out << SmallTokenizerJson(vocab);
  }
  InitModelOptions options;
  options.preset = "tiny";
  options.out_dir = dir;
  options.tokenizer_json = tok;
  options.seed = seed;
  return WriteRandomModel(options);
}

// Writes `preset` ("tiny" unless given) of `architecture` ("based", "jrt",
// "mamba2", "rat", "llama", ...) with a `vocab`-token WordLevel tokenizer
// into `dir` (created).
inline absl::Status WriteTinyModelOf(const std::string& architecture,
                                     const std::string& dir, uint64_t seed,
                                     int vocab,
                                     const std::string& preset = "tiny") {
  std::filesystem::create_directories(dir);
  const std::string tok = dir + ".tokenizer.json";
  {
    std::ofstream out(tok, std::ios::binary | std::ios::trunc);
    out << SmallTokenizerJson(vocab);
  }
  InitModelOptions options;
  options.architecture = architecture;
  options.preset = preset;
  options.out_dir = dir;
  options.tokenizer_json = tok;
  options.seed = seed;
  return WriteRandomModel(options);
}

// Worst |got[i] - want[i]| beyond 1e-5 · (1 + |want[i]|): <= 0 when two
// runs of the same kernels differ only in float summation order (the
// resident executor against the model's own forward).
inline double ExcessOverSummationOrder(absl::Span<const float> got,
                                       absl::Span<const float> want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0.0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    worst = std::max(worst, std::abs(double{got[i]} - want[i]) -
                                1e-5 * (1.0 + std::abs(double{want[i]})));
  }
  return worst;
}

// Every tensor of a safetensors file as owned f32, by stored name.
inline absl::StatusOr<std::map<std::string, Tensor>> ReadAllWeights(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::Open(path);
  if (!file.ok()) return file.status();
  std::map<std::string, Tensor> out;
  for (const SafetensorsEntry& e : (*file)->entries()) {
    absl::StatusOr<Tensor> t = (*file)->ReadF32(e);
    if (!t.ok()) return t.status();
    std::vector<float> copy(t->data(), t->data() + t->size());
    out.emplace(e.name, Tensor::FromVector(e.shape, std::move(copy)));
  }
  return out;
}

inline absl::Status WriteAllWeights(const std::string& path,
                                    const std::map<std::string, Tensor>& w) {
  std::vector<NamedTensor> named;
  for (const auto& [name, t] : w) named.push_back({name, &t});
  return WriteSafetensors(path, std::move(named));
}

// Multiplies every weight of rank >= 2 except embeddings by `factor`, so
// attention scores are far from uniform and bugs in masking show.
inline absl::Status SharpenWeights(const std::string& dir, float factor) {
  const std::string path = dir + "/model.safetensors";
  absl::StatusOr<std::map<std::string, Tensor>> w = ReadAllWeights(path);
  if (!w.ok()) return w.status();
  for (auto& [name, t] : *w) {
    if (t.rank() < 2 || name.find("embeddings") != std::string::npos) continue;
    for (float& x : t.mutable_span()) x *= factor;
  }
  return WriteAllWeights(path, *w);
}

// `weights_dtype` as --weights_dtype (nullopt: as stored).
inline std::unique_ptr<Model> LoadOrDie(
    const std::string& dir, std::optional<DType> weights_dtype = std::nullopt) {
  LoadOptions options;
  options.weights_dtype = weights_dtype;
  absl::StatusOr<std::unique_ptr<Model>> m = LoadModel(dir, options);
  EXPECT_OK(m);
  return m.ok() ? *std::move(m) : nullptr;
}

// Deterministic pseudo-random token ids in [0, vocab).
inline std::vector<int32_t> RandomTokens(int n, int vocab, uint64_t seed) {
  std::vector<int32_t> out(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return out;
}

}  // namespace twice::engine::testing

#endif  // TWICE_TESTS_ENGINE_TEST_MODEL_UTIL_H_
