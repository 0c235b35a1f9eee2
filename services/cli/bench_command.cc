// twice bench TARGET: the CLI's benchmarks (in-process, no server, except
// pipeline, which measures a running deployment).
//
//   twice bench engine    prefill / decode speed (bench_engine_command.cc)
//   twice bench store     state store put/get beside a plain file
//                         (bench_store_command.cc)
//   twice bench pipeline  ask modes' TTFT and prefill against a running
//                         server (bench_pipeline_command.cc)
//   twice bench load      concurrent mixed load against a running server,
//                         with loss and answer checks (bench_load_command.cc)
//
// Each target lives in its own file as RunBench<Target>; this only
// dispatches.
#include <string>

#include "services/cli/commands.h"

namespace twice::cli {

int RunBench(const CliContext& cli) {
  const std::string target = cli.args.empty() ? "" : cli.args[0];
  if (target == "engine") return RunBenchEngine(cli);
  if (target == "store" && cli.args.size() == 1) return RunBenchStore(cli);
  if (target == "pipeline") return RunBenchPipeline(cli);
  if (target == "load" && cli.args.size() == 1) return RunBenchLoad(cli);
  return ReportError(
      cli, absl::InvalidArgumentError(
               "usage: twice bench engine|store|pipeline|load [--json]"));
}

}  // namespace twice::cli
