// The twice-bench targets. Each returns the process exit code; cli.args[0]
// is the target's name.
#ifndef TWICE_BENCH_HARNESS_BENCH_COMMANDS_H_
#define TWICE_BENCH_HARNESS_BENCH_COMMANDS_H_

#include "bench/harness/bench_context.h"

namespace twice::bench {

int RunBenchEngine(const CliContext& cli);    // engine (no server)
int RunBenchStore(const CliContext& cli);     // store (no server)
int RunBenchPipeline(const CliContext& cli);  // pipeline (a server)
int RunBenchLoad(const CliContext& cli);      // load (a server)

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_BENCH_COMMANDS_H_
