// twice bench TARGET: benchmarks the CLI runs in-process (no server).
//
//   twice bench engine    prefill / decode speed (bench_engine_command.cc)
//   twice bench store     state store put/get beside a plain file
//                         (bench_store_command.cc)
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
  return ReportError(cli, absl::InvalidArgumentError(
                              "usage: twice bench engine|store [--json]"));
}

}  // namespace twice::cli
