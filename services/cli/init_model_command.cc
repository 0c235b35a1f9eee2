#include <cstdio>

#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "services/cli/commands.h"
#include "services/server/default_model.h"

namespace twice::cli {

int RunInitModel(const CliContext& cli) {
  if (cli.out.empty()) {
    return ReportError(
        cli, absl::InvalidArgumentError("usage: twice init-model "
                                        "--arch=based|jrt|mamba2|llama|rat "
                                        "--preset=PRESET --out=DIR "
                                        "[--weights_dtype=f32|bf16|f16]"));
  }
  engine::InitModelOptions options;
  options.architecture = cli.arch;
  options.preset = cli.preset;
  options.out_dir = cli.out;
  options.tokenizer_json =
      cli.tokenizer.empty() ? services::BuiltinTokenizerPath() : cli.tokenizer;
  options.seed = cli.seed;
  absl::StatusOr<std::optional<engine::DType>> dtype =
      engine::ParseWeightsDType(cli.weights_dtype);
  if (!dtype.ok()) return ReportError(cli, dtype.status());
  options.weights_dtype = *dtype;
  if (absl::Status written = engine::WriteRandomModel(options); !written.ok()) {
    return ReportError(cli, written);
  }
  if (cli.json) {
    PrintJson({{"out", cli.out}, {"arch", cli.arch}, {"preset", cli.preset}});
  } else {
    std::printf("wrote %s model (%s) to %s\n", cli.arch.c_str(),
                cli.preset.c_str(), cli.out.c_str());
  }
  return 0;
}

}  // namespace twice::cli
