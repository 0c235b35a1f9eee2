// Tiny random models of every architecture, written once into a temporary
// directory and loaded, for the state decoding fuzzers; and the framing of
// their inputs.
#ifndef TWICE_TESTS_FUZZ_TINY_MODELS_H_
#define TWICE_TESTS_FUZZ_TINY_MODELS_H_

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/models/init_llama_rat.h"
#include "engine/models/init_mamba2.h"
#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "tests/fuzz/fuzz_util.h"
#include "xxhash.h"

namespace twice::fuzz {

struct TinyModel {
  std::string name;
  std::unique_ptr<engine::Model> model;
};

// based, jrt, mamba2, llama, rat (tiny-swa: chunk-KV and window layers).
inline std::vector<TinyModel> WriteAndLoadTinyModels() {
  const std::string root = MakeTempDir();
  const std::string tokenizer = root + "/tokenizer.json";
  WriteFile(tokenizer, WordLevelTokenizerJson(300));
  struct Spec {
    const char* architecture;
    const char* preset;
  };
  const Spec specs[] = {{"based", "tiny"},
                        {"jrt", "tiny"},
                        {"mamba2", "tiny"},
                        {"llama", "tiny"},
                        {"rat", "tiny-swa"}};
  std::vector<TinyModel> out;
  for (const Spec& spec : specs) {
    engine::InitModelOptions options;
    options.architecture = spec.architecture;
    options.preset = spec.preset;
    options.out_dir = root + "/" + spec.architecture;
    options.tokenizer_json = tokenizer;
    options.seed = 7;
    std::filesystem::create_directories(options.out_dir);
    CheckOk(engine::WriteRandomModel(options), spec.architecture);
    auto model = engine::LoadModel(options.out_dir);
    CheckOk(model.status(), spec.architecture);
    out.push_back({spec.architecture, *std::move(model)});
  }
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  return out;
}

// A state of `model` after reading `n` tokens (a chunk-KV model then holds
// closed chunks).
inline std::unique_ptr<engine::SequenceState> StateAfter(
    const engine::Model& model, int n) {
  std::unique_ptr<engine::SequenceState> state = model.NewState();
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back(1 + (i * 37) % 250);
  CheckOk(model.Prefill(tokens, *state, engine::PrefillMode::kCausal).status(),
          "prefill");
  return state;
}

// Replaces the trailing u64 of `blob` (when it has one) by the XXH3-64 of
// every byte before it: the checksum of the state and block formats, so the
// fuzzer reaches the field checks behind it.
inline void FixTrailingChecksum(std::string& blob) {
  if (blob.size() < 8) return;
  const uint64_t sum = XXH3_64bits(blob.data(), blob.size() - 8);
  for (int i = 0; i < 8; ++i) {
    blob[blob.size() - 8 + i] = static_cast<char>((sum >> (8 * i)) & 0xff);
  }
}

// A decoded state must be usable: read one more token.
inline void StepDecoded(const engine::Model& model,
                        engine::SequenceState& state) {
  (void)model.Step(5, state);
}

}  // namespace twice::fuzz

#endif  // TWICE_TESTS_FUZZ_TINY_MODELS_H_
