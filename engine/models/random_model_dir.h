// The steps every random-model writer (init_model.h) shares: reading the
// tokenizer it ships, and writing the model directory (config.json,
// model.safetensors in the requested dtype, tokenizer.json).
#ifndef TWICE_ENGINE_MODELS_RANDOM_MODEL_DIR_H_
#define TWICE_ENGINE_MODELS_RANDOM_MODEL_DIR_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/models/init_model.h"
#include "engine/tensor/tensor.h"

namespace twice::engine {

struct InitTokenizer {
  std::string json;
  int64_t vocab = 0;
  int64_t eos = -1;  // "<|endoftext|>" or "</s>"; -1 when it has neither
};

// NOT_FOUND when `path` cannot be read; INVALID_ARGUMENT naming it when it
// does not parse.
[[nodiscard]] absl::StatusOr<InitTokenizer> ReadInitTokenizer(
    const std::string& path);

// Creates options.out_dir and writes the three files, every tensor stored
// in options.weights_dtype (F32 when unset). INVALID_ARGUMENT for I8 (no
// file format of ours holds its scales) or an empty out_dir; UNAVAILABLE
// for I/O errors.
[[nodiscard]] absl::Status WriteModelDir(
    const InitModelOptions& options, const std::string& config_text,
    const std::string& tokenizer_json,
    const std::map<std::string, Tensor>& weights);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_RANDOM_MODEL_DIR_H_
