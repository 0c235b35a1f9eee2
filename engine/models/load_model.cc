// LoadModel: reads a model directory (config.json, model.safetensors or a
// sharded index, tokenizer.json) and builds the model its config names.
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "engine/config/based_config.h"
#include "engine/config/mamba2_config.h"
#include "engine/models/based_model.h"
#include "engine/models/fingerprint.h"
#include "engine/models/load_llama_rat.h"
#include "engine/models/mamba2_model.h"
#include "engine/models/model.h"
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
  if (in.bad())
    return absl::UnavailableError(absl::StrCat("error reading ", path));
  return std::move(buf).str();
}

// Prefixes a status message with where it came from.
[[nodiscard]] absl::Status Annotate(const absl::Status& s,
                                    std::string_view where) {
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat(AbslView(where), ": ", s.message()));
}

// Upstream's checkpoint loading rules: drop a leading Lightning "model."
// prefix, drop training metric entries, and rename the legacy "conv1" of
// BaseConv layers to "conv".
std::string BasedWeightName(std::string_view stored) {
  if (stored.find("metrics") != std::string_view::npos) return "";
  if (stored.starts_with("model.")) stored.remove_prefix(6);
  return absl::StrReplaceAll(AbslView(stored), {{"conv1", "conv"}});
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> LoadModel(const std::string& dir) {
  const std::string config_path = dir + "/config.json";
  TWICE_ASSIGN_OR_RETURN(std::string config_json, ReadFile(config_path));
  if (IsMamba2ConfigJson(config_json)) return LoadMamba2Model(dir, config_json);
  if (IsLlamaOrRatConfig(config_json)) return LoadLlamaOrRat(dir, config_json);
  absl::StatusOr<BasedConfig> config = ParseBasedConfig(config_json);
  if (!config.ok()) return Annotate(config.status(), dir);

  const std::string tokenizer_path = dir + "/tokenizer.json";
  TWICE_ASSIGN_OR_RETURN(std::string tokenizer_json, ReadFile(tokenizer_path));
  // Parse the very bytes that are fingerprinted.
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::FromJson(tokenizer_json);
  if (!tokenizer.ok()) return Annotate(tokenizer.status(), tokenizer_path);

  TWICE_ASSIGN_OR_RETURN(WeightMap weights,
                         WeightMap::OpenDir(dir, BasedWeightName));
  TWICE_ASSIGN_OR_RETURN(
      std::string fingerprint,
      ModelFingerprint(config->architecture, config->canonical_json, weights,
                       tokenizer_json, kStateDType));
  TWICE_ASSIGN_OR_RETURN(
      std::unique_ptr<BasedModel> model,
      BasedModel::Create(*std::move(config), std::move(weights),
                         *std::move(tokenizer), std::move(fingerprint)));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace twice::engine
