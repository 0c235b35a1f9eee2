// The RADOS store's put/get latency beside the raw librados client writing
// and reading the same bytes on the same cluster, alternated in one run
// (`twice-bench store --store=rados` prints it). The raw client is the
// floor: one write_full of a new object, one whole-object read; the store
// adds an exclusive create, its index xattrs, the envelope and the
// checksum check on every read.
#ifndef TWICE_BENCH_HARNESS_RADOS_STORE_BENCHMARK_H_
#define TWICE_BENCH_HARNESS_RADOS_STORE_BENCHMARK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace twice::bench {

struct RadosStoreBenchOptions {
  std::string conf_file;  // the cluster's ceph.conf. Required.
  std::string user = "admin";
  // Pools PREFIX-states and PREFIX-meta (created when missing); the
  // benchmark's objects are removed afterwards. Default: "twice-bench".
  std::string pool_prefix = "twice-bench";
  std::vector<int64_t> sizes_bytes = {int64_t{1} << 20, int64_t{16} << 20};
  int iterations = 10;  // timed operations per size, kind and client
};

struct RadosStoreBenchRow {
  int64_t bytes = 0;
  int iterations = 0;
  double put_p50_ms = 0;  // Store::PutState of a new key
  double raw_put_p50_ms = 0;
  double get_p50_ms = 0;  // Store::GetState, verified
  double raw_get_p50_ms = 0;
};

[[nodiscard]] absl::StatusOr<std::vector<RadosStoreBenchRow>>
RunRadosStoreBenchmark(const RadosStoreBenchOptions& options);

// What the RADOS benchmarks answer in a build without librados.
absl::Status RadosBenchUnavailable();

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_RADOS_STORE_BENCHMARK_H_
