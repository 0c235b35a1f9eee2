#include "services/server/default_model.h"

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/models/init_model.h"
#include "services/common/log.h"

namespace twice::services {

std::string BuiltinTokenizerPath() {
  // An installed image sets TWICE_TOKENIZER_JSON; a source build uses the
  // copy in the source tree.
  if (const char* env = std::getenv("TWICE_TOKENIZER_JSON"); env != nullptr) {
    return env;
  }
  return TWICE_BUILTIN_TOKENIZER_JSON;
}

absl::StatusOr<std::string> EnsureDefaultModel(const std::string& data_dir) {
  const std::filesystem::path dir =
      std::filesystem::path(data_dir) / "models" / "default";
  if (std::filesystem::exists(dir / "config.json") &&
      std::filesystem::exists(dir / "model.safetensors") &&
      std::filesystem::exists(dir / "tokenizer.json")) {
    return dir.string();
  }
  engine::InitModelOptions options;
  options.architecture = "based";
  options.preset = "tiny";
  options.out_dir = dir.string();
  options.tokenizer_json = BuiltinTokenizerPath();
  options.seed = 0;
  absl::Status written = engine::WriteRandomModel(options);
  if (!written.ok()) {
    return absl::Status(written.code(),
                        absl::StrCat("creating the default model in ",
                                     dir.string(), ": ", written.message()));
  }
  Log(LogLevel::kInfo, "model.created",
      absl::StrCat("dir=", LogValue(dir.string()), " preset=tiny"));
  return dir.string();
}

}  // namespace twice::services
