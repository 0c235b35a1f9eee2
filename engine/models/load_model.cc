// LoadModel: reads a model directory (config.json, model.safetensors or a
// sharded index, tokenizer.json) and builds the architecture its config
// names (architectures.h), the same steps for every architecture.
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/executor/resident_model.h"
#include "engine/models/architectures.h"
#include "engine/models/fingerprint.h"
#include "engine/models/model.h"
#include "engine/util/absl_view.h"
#include "engine/weights/weight_map.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

// States are f32 whatever the weights' dtype (design §3).
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

}  // namespace

int64_t ResidentPrefillChunk(const LoadOptions& options) {
  if (options.resident_prefill_chunk > 0) return options.resident_prefill_chunk;
  return options.resident_device == "cuda" ? kCudaPrefillChunk
                                           : kCpuPrefillChunk;
}

absl::StatusOr<std::unique_ptr<Model>> LoadModel(const std::string& dir,
                                                 const LoadOptions& options) {
  if (options.resident_prefill_chunk < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("resident_prefill_chunk must be >= 0 (0: by device), "
                     "got ",
                     options.resident_prefill_chunk));
  }
  const std::string config_path = dir + "/config.json";
  TWICE_ASSIGN_OR_RETURN(std::string config_json, ReadFile(config_path));
  const Architecture& arch = ArchitectureOf(config_json);
  absl::StatusOr<ParsedConfig> config = arch.parse(config_json);
  if (!config.ok()) return Annotate(config.status(), dir);

  const std::string tokenizer_path = dir + "/tokenizer.json";
  TWICE_ASSIGN_OR_RETURN(std::string tokenizer_json, ReadFile(tokenizer_path));
  // Parse the very bytes that are fingerprinted.
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::FromJson(tokenizer_json);
  if (!tokenizer.ok()) return Annotate(tokenizer.status(), tokenizer_path);

  TWICE_ASSIGN_OR_RETURN(
      WeightMap weights,
      WeightMap::OpenDir(dir, arch.weight_name, options.weights_dtype));
  TWICE_ASSIGN_OR_RETURN(
      std::string fingerprint,
      ModelFingerprint(config->architecture, config->canonical_json, weights,
                       tokenizer_json, kStateDType));
  TWICE_ASSIGN_OR_RETURN(
      std::unique_ptr<Model> model,
      arch.build(config_json, std::move(weights), *std::move(tokenizer),
                 std::move(fingerprint)));
  if (!options.resident || !SupportsResidentExecutor(*model)) return model;
  std::unique_ptr<ExecutorDevice> device;
  if (options.resident_device == "cuda") {
    TWICE_ASSIGN_OR_RETURN(device, NewCudaExecutorDevice(0));
  } else if (options.resident_device == "cpu") {
    device = NewCpuExecutorDevice();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("resident executor device must be cpu or cuda, got \"",
                     options.resident_device, "\""));
  }
  ResidentExecutorOptions executor;
  executor.slots = options.resident_slots;
  executor.kv_cache_tokens = options.resident_kv_tokens;
  executor.step_graphs = options.resident_step_graphs;
  executor.prefill_chunk = ResidentPrefillChunk(options);
  TWICE_ASSIGN_OR_RETURN(
      std::unique_ptr<ResidentModel> resident,
      ResidentModel::Create(std::move(model), std::move(device), executor,
                            options.resident_share_prefill_passes));
  return std::unique_ptr<Model>(std::move(resident));
}

}  // namespace twice::engine
