#include "engine/models/architectures.h"

#include <utility>

#include "absl/strings/str_replace.h"
#include "engine/config/based_config.h"
#include "engine/config/granite_hybrid_config.h"
#include "engine/config/json_fields.h"
#include "engine/config/llama_config.h"
#include "engine/config/mamba2_config.h"
#include "engine/config/nemotron_h_config.h"
#include "engine/config/rat_config.h"
#include "engine/models/based_model.h"
#include "engine/models/granite_hybrid_model.h"
#include "engine/models/llama_model.h"
#include "engine/models/mamba2_model.h"
#include "engine/models/nemotron_h_model.h"
#include "engine/models/rat_model.h"
#include "engine/util/absl_view.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

// Parse + build for a config type C (with .architecture and
// .canonical_json) and a model type M with M::Create(C, ...).
template <typename C, typename M, absl::StatusOr<C> (*Parse)(std::string_view)>
struct Entry {
  static absl::StatusOr<ParsedConfig> ParseOnly(std::string_view json) {
    TWICE_ASSIGN_OR_RETURN(C config, Parse(json));
    return ParsedConfig{config.architecture, config.canonical_json};
  }
  static absl::StatusOr<std::unique_ptr<Model>> Build(
      std::string_view json, WeightMap weights,
      std::unique_ptr<Tokenizer> tokenizer, std::string fingerprint) {
    TWICE_ASSIGN_OR_RETURN(C config, Parse(json));
    TWICE_ASSIGN_OR_RETURN(
        std::unique_ptr<M> model,
        M::Create(std::move(config), std::move(weights), std::move(tokenizer),
                  std::move(fingerprint)));
    return std::unique_ptr<Model>(std::move(model));
  }
};

bool IsLlama(std::string_view json) {
  return config::ConfigArchitecture(json) == "llama";
}
bool IsNemotronH(std::string_view json) {
  return config::ConfigArchitecture(json) == "nemotron_h";
}
bool IsGraniteHybrid(std::string_view json) {
  return config::ConfigArchitecture(json) == "granitemoehybrid";
}
bool IsRat(std::string_view json) {
  return config::ConfigArchitecture(json) == "rat";
}
bool Anything(std::string_view) { return true; }

std::string SameName(std::string_view stored) { return std::string(stored); }

// Upstream Based / JRT-RNN loading rules: drop a leading Lightning
// "model." prefix, drop training metric entries, and rename the legacy
// "conv1" of BaseConv layers to "conv".
std::string BasedWeightName(std::string_view stored) {
  if (stored.find("metrics") != std::string_view::npos) return "";
  if (stored.starts_with("model.")) stored.remove_prefix(6);
  return absl::StrReplaceAll(AbslView(stored), {{"conv1", "conv"}});
}

// RAT checkpoints saved after torch.compile carry "_orig_mod." in their
// names (fact sheet §2.1); the state dict may also sit under "task.".
std::string RatWeightName(std::string_view stored) {
  if (stored.starts_with("task.")) stored.remove_prefix(5);
  std::string name(stored);
  for (size_t at; (at = name.find("_orig_mod.")) != std::string::npos;) {
    name.erase(at, 10);
  }
  return name;
}

using Mamba2 = Entry<Mamba2Config, Mamba2Model, ParseMamba2Config>;
using Llama = Entry<LlamaConfig, LlamaModel, ParseLlamaConfig>;
using Rat = Entry<RatConfig, RatModel, ParseRatConfig>;
using GraniteHybrid =
    Entry<GraniteHybridConfig, GraniteHybridModel, ParseGraniteHybridConfig>;
using NemotronH = Entry<NemotronHConfig, NemotronHModel, ParseNemotronHConfig>;
using Based = Entry<BasedConfig, BasedModel, ParseBasedConfig>;

constexpr Architecture kArchitectures[] = {
    {"mamba2", IsMamba2ConfigJson, Mamba2WeightName, Mamba2::ParseOnly,
     Mamba2::Build},
    {"llama", IsLlama, SameName, Llama::ParseOnly, Llama::Build},
    {"rat", IsRat, RatWeightName, Rat::ParseOnly, Rat::Build},
    {"nemotron_h", IsNemotronH, SameName, NemotronH::ParseOnly,
     NemotronH::Build},
    {"granitemoehybrid", IsGraniteHybrid, SameName, GraniteHybrid::ParseOnly,
     GraniteHybrid::Build},
    {"based / jrt", Anything, BasedWeightName, Based::ParseOnly, Based::Build},
};

}  // namespace

std::span<const Architecture> Architectures() { return kArchitectures; }

const Architecture& ArchitectureOf(std::string_view config_json) {
  for (const Architecture& a : kArchitectures) {
    if (a.matches(config_json)) return a;
  }
  return kArchitectures[std::size(kArchitectures) - 1];
}

}  // namespace twice::engine
