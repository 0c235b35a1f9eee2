// twice-bench TARGET: Twice's benchmark and load harness, a program apart
// from the `twice` client so that the product carries none of it.
//
//   twice-bench engine    prefill / decode speed next to ceilings measured
//                         in the same run (no server; bench_engine_command.cc)
//   twice-bench store     state store put/get beside a plain file (no
//                         server; bench_store_command.cc)
//   twice-bench pipeline  ask modes' TTFT and total time, cold vs cached,
//                         against a running server (bench_pipeline_command.cc)
//   twice-bench load      concurrent mixed load against a running server,
//                         with loss and answer checks (bench_load_command.cc)
//
// Connection flags as `twice` (--server, --json, --tls_*, --token); each
// target's own flags live in its file. Exit code 0 on success, 1 on any
// error, 2 on a usage error.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "bench/harness/bench_commands.h"
#include "services/cli/connection_flags.h"

ABSL_FLAG(std::string, model, "",
          "pipeline, load: model name (empty = the server's default)");
ABSL_FLAG(int64_t, segment_tokens, 0,
          "pipeline, load: ingest segment size (0 = the model's training "
          "context)");
ABSL_FLAG(std::string, arch, "based",
          "engine: architectures, comma-separated (based, jrt, mamba2, llama, "
          "rat)");
ABSL_FLAG(std::string, preset, "tiny",
          "engine: tiny | 360m-shape | realistic | width-2048");
ABSL_FLAG(std::string, weights_dtype, "auto",
          "engine: comma-separated dtypes the weights are loaded in, rows of "
          "each side by side (auto, f32, bf16, f16, int8)");
ABSL_FLAG(std::string, tokenizer, "",
          "engine: tokenizer.json of the random model (empty = built-in "
          "GPT-2)");
ABSL_FLAG(uint64_t, seed, 0, "engine: seed of the random weights");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "twice-bench engine|store|pipeline|load [flags] [--json]\n"
      "engine and store run in process; pipeline and load drive the server "
      "at --server=HOST:PORT");
  const std::vector<std::string> positional =
      twice::cli::ParseClientCommandLine(argc, argv);
  if (positional.size() < 2) {
    std::fprintf(stderr, "%s\n", absl::ProgramUsageMessage().data());
    return 2;
  }
  twice::cli::CliContext cli;
  twice::cli::SetConnectionFromFlags(cli);
  cli.args.assign(positional.begin() + 1, positional.end());
  cli.model = absl::GetFlag(FLAGS_model);
  cli.segment_tokens = absl::GetFlag(FLAGS_segment_tokens);
  cli.arch = absl::GetFlag(FLAGS_arch);
  cli.preset = absl::GetFlag(FLAGS_preset);
  cli.weights_dtype = absl::GetFlag(FLAGS_weights_dtype);
  cli.tokenizer = absl::GetFlag(FLAGS_tokenizer);
  cli.seed = absl::GetFlag(FLAGS_seed);

  const std::string target = positional[1];
  if (target == "engine") return twice::bench::RunBenchEngine(cli);
  if (target == "store" && cli.args.size() == 1) {
    return twice::bench::RunBenchStore(cli);
  }
  if (target == "pipeline") return twice::bench::RunBenchPipeline(cli);
  if (target == "load" && cli.args.size() == 1) {
    return twice::bench::RunBenchLoad(cli);
  }
  std::fprintf(stderr, "twice-bench: unknown target '%s'\n%s\n", target.c_str(),
               absl::ProgramUsageMessage().data());
  return 2;
}
