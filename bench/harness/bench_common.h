// What the benchmarks that run against a deployment (bench pipeline, bench
// load) share: finding the model they drive, and the statistics they print.
#ifndef TWICE_BENCH_HARNESS_BENCH_COMMON_H_
#define TWICE_BENCH_HARNESS_BENCH_COMMON_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/harness/bench_context.h"
#include "twice/v1/orchestrator.grpc.pb.h"

namespace twice::bench {

// The served model named `name` (empty = the server's default), from
// ListModels. NOT_FOUND when the server does not serve it; the call's own
// error otherwise, prefixed with "ListModels: ".
[[nodiscard]] absl::StatusOr<v1::ModelInfo> FindServedModel(
    const CliContext& cli, v1::Orchestrator::StubInterface& stub,
    const std::string& name);

// Nearest-rank percentile (p in [0, 1]) of `values`; 0 when empty.
double Percentile(std::vector<double> values, double p);

// Milliseconds since `start` on the steady clock.
double MillisSince(std::chrono::steady_clock::time_point start);

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_BENCH_COMMON_H_
