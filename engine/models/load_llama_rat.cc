#include "engine/models/load_llama_rat.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/config/json_fields.h"
#include "engine/config/llama_config.h"
#include "engine/config/rat_config.h"
#include "engine/models/fingerprint.h"
#include "engine/models/llama_model.h"
#include "engine/models/rat_model.h"
#include "engine/util/absl_view.h"
#include "engine/weights/weight_map.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

constexpr char kStateDType[] = "f32";

[[nodiscard]] absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) {
    return absl::UnavailableError(absl::StrCat("error reading ", path));
  }
  return std::move(buf).str();
}

[[nodiscard]] absl::Status Annotate(const absl::Status& s,
                                    std::string_view where) {
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat(AbslView(where), ": ", s.message()));
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

std::string SameName(std::string_view stored) { return std::string(stored); }

}  // namespace

bool IsLlamaOrRatConfig(std::string_view config_json) {
  const std::string arch = config::ConfigArchitecture(config_json);
  return arch == "llama" || arch == "rat";
}

absl::StatusOr<std::unique_ptr<Model>> LoadLlamaOrRat(
    const std::string& dir, std::string_view config_json) {
  const std::string arch = config::ConfigArchitecture(config_json);
  const std::string tokenizer_path = dir + "/tokenizer.json";
  TWICE_ASSIGN_OR_RETURN(std::string tokenizer_json, ReadFile(tokenizer_path));
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::FromJson(tokenizer_json);
  if (!tokenizer.ok()) return Annotate(tokenizer.status(), tokenizer_path);
  if (arch == "llama") {
    absl::StatusOr<LlamaConfig> config = ParseLlamaConfig(config_json);
    if (!config.ok()) return Annotate(config.status(), dir);
    TWICE_ASSIGN_OR_RETURN(WeightMap weights,
                           WeightMap::OpenDir(dir, SameName));
    TWICE_ASSIGN_OR_RETURN(
        std::string fingerprint,
        ModelFingerprint(config->architecture, config->canonical_json, weights,
                         tokenizer_json, kStateDType));
    TWICE_ASSIGN_OR_RETURN(
        std::unique_ptr<LlamaModel> model,
        LlamaModel::Create(*std::move(config), std::move(weights),
                           *std::move(tokenizer), std::move(fingerprint)));
    return std::unique_ptr<Model>(std::move(model));
  }
  absl::StatusOr<RatConfig> config = ParseRatConfig(config_json);
  if (!config.ok()) return Annotate(config.status(), dir);
  TWICE_ASSIGN_OR_RETURN(WeightMap weights,
                         WeightMap::OpenDir(dir, RatWeightName));
  TWICE_ASSIGN_OR_RETURN(
      std::string fingerprint,
      ModelFingerprint(config->architecture, config->canonical_json, weights,
                       tokenizer_json, kStateDType));
  TWICE_ASSIGN_OR_RETURN(
      std::unique_ptr<RatModel> model,
      RatModel::Create(*std::move(config), std::move(weights),
                       *std::move(tokenizer), std::move(fingerprint)));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace twice::engine
