// The harness runs as a client of a deployment (or in process, for engine
// and store): it shares the CLI's connection settings and output helpers.
#ifndef TWICE_BENCH_HARNESS_BENCH_CONTEXT_H_
#define TWICE_BENCH_HARNESS_BENCH_CONTEXT_H_

#include "services/cli/cli_context.h"

namespace twice::bench {

using cli::CliContext;
using cli::PrintJson;
using cli::ReportError;

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_BENCH_CONTEXT_H_
