// Loading of the architectures with their own config formats: the Llama
// baseline (HF LlamaForCausalLM config.json) and RAT (a flat config.json
// with architecture "rat"). LoadModel dispatches here by the architecture
// the config names.
#ifndef TWICE_ENGINE_MODELS_LOAD_LLAMA_RAT_H_
#define TWICE_ENGINE_MODELS_LOAD_LLAMA_RAT_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/models/model.h"

namespace twice::engine {

// True when `config_json` names "llama" or "rat".
bool IsLlamaOrRatConfig(std::string_view config_json);

// Loads the model in `dir` whose config.json text is `config_json` (one of
// the architectures IsLlamaOrRatConfig accepts). Errors name the file.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Model>> LoadLlamaOrRat(
    const std::string& dir, std::string_view config_json);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_LOAD_LLAMA_RAT_H_
