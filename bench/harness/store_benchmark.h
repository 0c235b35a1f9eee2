// The store's put/get latency beside a plain file write/read of the same
// bytes, measured in the same run on the same file system (`twice-bench
// store` prints it). The file baseline is what an engine without a store
// does: write the state to a file with fsync, read it back whole; it has no
// checksum and no index, which is what the store's cost is weighed against.
#ifndef TWICE_BENCH_HARNESS_STORE_BENCHMARK_H_
#define TWICE_BENCH_HARNESS_STORE_BENCHMARK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace twice::bench {

struct StoreBenchOptions {
  // Directory under which a scratch directory is made (and removed after).
  // Default: the system temp directory.
  std::string dir;
  // State sizes to measure. Default: 1, 16 and 64 MiB.
  std::vector<int64_t> sizes_bytes = {int64_t{1} << 20, int64_t{16} << 20,
                                      int64_t{64} << 20};
  // Timed puts and gets (and file writes and reads) per size. Default: 20.
  int iterations = 20;
};

struct StoreBenchRow {
  int64_t bytes = 0;
  int iterations = 0;
  // Synced PutState of a new key (WAL fsync included).
  double put_p50_ms = 0;
  double put_p99_ms = 0;
  // GetState from a warm store: states that fit the store's cache (default
  // 256 MiB) read before, every check included.
  double get_p50_ms = 0;
  double get_p99_ms = 0;
  // GetState with the store's cache off: from blob files in the page cache.
  double get_uncached_p50_ms = 0;
  double get_uncached_p99_ms = 0;
  double put_mb_per_s = 0;  // at p50
  double get_mb_per_s = 0;  // at p50
  // Plain file of the same bytes: write + fsync + close, and open + read
  // whole + close from the page cache (p50).
  double file_write_fsync_ms = 0;
  double file_read_ms = 0;
};

[[nodiscard]] absl::StatusOr<std::vector<StoreBenchRow>> RunStoreBenchmark(
    const StoreBenchOptions& options);

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_STORE_BENCHMARK_H_
