// The architectures LoadModel knows: one entry each, tried in order.
//
// An entry says how to recognise its config.json, how its checkpoint names
// tensors (the rule that canonicalises stored names), and how to build the
// model from the parsed config, the opened weights and the tokenizer.
// Adding an architecture is one config parser, one Create that lists its
// blocks for the shared residual-stack driver (stacked_model.h) and one
// entry in architectures.cc.
#ifndef TWICE_ENGINE_MODELS_ARCHITECTURES_H_
#define TWICE_ENGINE_MODELS_ARCHITECTURES_H_

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/models/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

// What a parsed config.json contributes to the fingerprint.
struct ParsedConfig {
  std::string architecture;    // as the fingerprint and description say it
  std::string canonical_json;  // the config's canonical form
};

struct Architecture {
  // Names in messages, e.g. "based / jrt".
  std::string_view name;
  // Whether `config_json` is this architecture's config.
  bool (*matches)(std::string_view config_json);
  // Stored tensor name -> canonical name ("" ignores the tensor).
  std::string (*weight_name)(std::string_view stored);
  // Parses the config (INVALID_ARGUMENT naming the key otherwise).
  absl::StatusOr<ParsedConfig> (*parse)(std::string_view config_json);
  // Builds the model; `config_json` parses (parse succeeded on it).
  absl::StatusOr<std::unique_ptr<Model>> (*build)(
      std::string_view config_json, WeightMap weights,
      std::unique_ptr<Tokenizer> tokenizer, std::string fingerprint);
};

// Every architecture, most specific first (the last one, Based / JRT-RNN,
// takes any config the others do not recognise).
std::span<const Architecture> Architectures();

// The entry whose `matches` accepts `config_json` first.
const Architecture& ArchitectureOf(std::string_view config_json);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_ARCHITECTURES_H_
