// What a document write costs on the RADOS store now that every commit is
// announced to the watchers of its index object (storage/rados/
// rados_record_watch.h): DocumentCatalog::UpdateDocument with 0, 1 and 4
// other connections watching the document, beside the raw librados client
// doing the same two round trips without the notify (an omap read, then an
// omap write of the same bytes to another object), alternated in one run
// (`twice-bench store --store=rados` prints it after the state table).
#ifndef TWICE_BENCH_HARNESS_RADOS_RECORD_BENCHMARK_H_
#define TWICE_BENCH_HARNESS_RADOS_RECORD_BENCHMARK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/harness/rados_store_benchmark.h"

namespace twice::bench {

struct RadosRecordBenchRow {
  int watchers = 0;  // other connections watching the document's index
  int iterations = 0;
  double commit_p50_ms = 0;  // UpdateDocument: read, commit, announce
  double raw_p50_ms = 0;     // omap read + omap write, no notify
};

// Uses options.conf_file, user, pool_prefix and iterations.
[[nodiscard]] absl::StatusOr<std::vector<RadosRecordBenchRow>>
RunRadosRecordBenchmark(const RadosStoreBenchOptions& options);

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_RADOS_RECORD_BENCHMARK_H_
