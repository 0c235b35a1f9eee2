// LoadMamba2Model: the Mamba-2 branch of LoadModel (model.h), kept in its own
// file so each architecture's loading rules stay beside its model.
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/config/mamba2_config.h"
#include "engine/models/fingerprint.h"
#include "engine/models/mamba2_model.h"
#include "engine/util/absl_view.h"
#include "engine/weights/weight_map.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

// States are f32 whatever the weights' dtype (design §3).
constexpr char kStateDType[] = "f32";

[[nodiscard]] absl::StatusOr<std::string> ReadText(const std::string& path) {
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

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> LoadMamba2Model(
    const std::string& dir, std::string_view config_json) {
  absl::StatusOr<Mamba2Config> config = ParseMamba2Config(config_json);
  if (!config.ok()) return Annotate(config.status(), dir);
  const std::string tokenizer_path = dir + "/tokenizer.json";
  TWICE_ASSIGN_OR_RETURN(std::string tokenizer_json, ReadText(tokenizer_path));
  // Parse the very bytes that are fingerprinted.
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::FromJson(tokenizer_json);
  if (!tokenizer.ok()) return Annotate(tokenizer.status(), tokenizer_path);
  TWICE_ASSIGN_OR_RETURN(WeightMap weights,
                         WeightMap::OpenDir(dir, Mamba2WeightName));
  TWICE_ASSIGN_OR_RETURN(
      std::string fingerprint,
      ModelFingerprint(config->architecture, config->canonical_json, weights,
                       tokenizer_json, kStateDType));
  TWICE_ASSIGN_OR_RETURN(
      std::unique_ptr<Mamba2Model> model,
      Mamba2Model::Create(*std::move(config), std::move(weights),
                          *std::move(tokenizer), std::move(fingerprint)));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace twice::engine
