// twice-bench store: verified state store put/get latency beside a plain
// fsynced file write and a whole-file read of the same bytes, measured in
// the same run (bench/harness/store_benchmark.h).
//
//   twice-bench store [--store_sizes_mb=1,16,64] [--store_iterations=20]
//                     [--store_dir=DIR] [--json]
//   twice-bench store --store=rados --rados_conf=CEPH.CONF
//                     [--store_sizes_mb=...] [--store_iterations=...]
//     the RADOS store beside the raw librados client on the same cluster
//     (bench/harness/rados_store_benchmark.h), then a document write with
//     0, 1 and 4 watchers beside the same round trips without the notify
//     (bench/harness/rados_record_benchmark.h)
//
// get_* reads states that fit the store's cache (a warm store);
// get_uncached_* reads them from blob files in the page cache. --json prints
// one object per state size.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "bench/harness/bench_commands.h"
#include "bench/harness/rados_record_benchmark.h"
#include "bench/harness/rados_store_benchmark.h"
#include "bench/harness/store_benchmark.h"

ABSL_FLAG(std::vector<std::string>, store_sizes_mb,
          (std::vector<std::string>{"1", "16", "64"}),
          "bench store: state sizes in MiB");
ABSL_FLAG(int, store_iterations, 20,
          "bench store: timed operations per size and kind");
ABSL_FLAG(std::string, store, "rocksdb",
          "bench store: rocksdb (beside a plain file) or rados (beside the "
          "raw librados client; --rados_conf)");
ABSL_FLAG(std::string, rados_conf, "",
          "bench store --store=rados: the cluster's ceph.conf");
ABSL_FLAG(std::string, store_dir, "",
          "bench store: directory for scratch files (empty = system temp)");

namespace twice::bench {
namespace {

int RunRados(const CliContext& cli, const std::vector<int64_t>& sizes) {
  RadosStoreBenchOptions options;
  options.conf_file = absl::GetFlag(FLAGS_rados_conf);
  options.iterations = absl::GetFlag(FLAGS_store_iterations);
  options.sizes_bytes = sizes;
  if (options.conf_file.empty()) {
    return ReportError(
        cli, absl::InvalidArgumentError("--store=rados needs --rados_conf"));
  }
  absl::StatusOr<std::vector<RadosStoreBenchRow>> rows =
      RunRadosStoreBenchmark(options);
  if (!rows.ok()) return ReportError(cli, rows.status());
  if (!cli.json) {
    std::printf("%10s %10s %10s %8s %10s %10s %8s\n", "bytes", "put_p50",
                "raw_put", "put/raw", "get_p50", "raw_get", "get/raw");
  }
  for (const RadosStoreBenchRow& r : *rows) {
    if (cli.json) {
      PrintJson({{"bytes", r.bytes},
                 {"iterations", r.iterations},
                 {"put_p50_ms", r.put_p50_ms},
                 {"raw_put_p50_ms", r.raw_put_p50_ms},
                 {"get_p50_ms", r.get_p50_ms},
                 {"raw_get_p50_ms", r.raw_get_p50_ms},
                 {"put_vs_raw", r.put_p50_ms / r.raw_put_p50_ms},
                 {"get_vs_raw", r.get_p50_ms / r.raw_get_p50_ms}});
      continue;
    }
    std::printf("%10lld %10.2f %10.2f %7.2fx %10.2f %10.2f %7.2fx\n",
                static_cast<long long>(r.bytes), r.put_p50_ms, r.raw_put_p50_ms,
                r.put_p50_ms / r.raw_put_p50_ms, r.get_p50_ms, r.raw_get_p50_ms,
                r.get_p50_ms / r.raw_get_p50_ms);
  }
  absl::StatusOr<std::vector<RadosRecordBenchRow>> records =
      RunRadosRecordBenchmark(options);
  if (!records.ok()) return ReportError(cli, records.status());
  if (!cli.json) {
    std::printf("\n%10s %12s %10s %10s\n", "watchers", "commit_p50", "raw_p50",
                "ratio");
  }
  for (const RadosRecordBenchRow& r : *records) {
    if (cli.json) {
      PrintJson({{"watchers", r.watchers},
                 {"iterations", r.iterations},
                 {"commit_p50_ms", r.commit_p50_ms},
                 {"raw_p50_ms", r.raw_p50_ms},
                 {"commit_vs_raw", r.commit_p50_ms / r.raw_p50_ms}});
      continue;
    }
    std::printf("%10d %12.2f %10.2f %9.2fx\n", r.watchers, r.commit_p50_ms,
                r.raw_p50_ms, r.commit_p50_ms / r.raw_p50_ms);
  }
  return 0;
}

}  // namespace

int RunBenchStore(const CliContext& cli) {
  StoreBenchOptions options;
  options.dir = absl::GetFlag(FLAGS_store_dir);
  options.iterations = absl::GetFlag(FLAGS_store_iterations);
  options.sizes_bytes.clear();
  for (const std::string& mb : absl::GetFlag(FLAGS_store_sizes_mb)) {
    char* end = nullptr;
    const double value = std::strtod(mb.c_str(), &end);
    if (end == mb.c_str() || *end != '\0' || !(value > 0)) {
      return ReportError(cli, absl::InvalidArgumentError(
                                  "--store_sizes_mb takes positive numbers"));
    }
    options.sizes_bytes.push_back(static_cast<int64_t>(value * (1 << 20)));
  }
  const std::string store = absl::GetFlag(FLAGS_store);
  if (store == "rados") return RunRados(cli, options.sizes_bytes);
  if (store != "rocksdb") {
    return ReportError(
        cli, absl::InvalidArgumentError("--store must be rocksdb or rados"));
  }
  absl::StatusOr<std::vector<StoreBenchRow>> rows = RunStoreBenchmark(options);
  if (!rows.ok()) return ReportError(cli, rows.status());
  if (!cli.json) {
    std::printf("%10s %9s %9s %11s %8s %9s %9s %9s %8s %11s %11s\n", "bytes",
                "put_p50", "put_p99", "file_w+sync", "put/file", "get_p50",
                "get_p99", "file_read", "get/file", "uncache_p50",
                "uncache_p99");
  }
  for (const StoreBenchRow& r : *rows) {
    if (cli.json) {
      PrintJson({{"bytes", r.bytes},
                 {"iterations", r.iterations},
                 {"put_p50_ms", r.put_p50_ms},
                 {"put_p99_ms", r.put_p99_ms},
                 {"get_p50_ms", r.get_p50_ms},
                 {"get_p99_ms", r.get_p99_ms},
                 {"get_uncached_p50_ms", r.get_uncached_p50_ms},
                 {"get_uncached_p99_ms", r.get_uncached_p99_ms},
                 {"put_mb_per_s", r.put_mb_per_s},
                 {"get_mb_per_s", r.get_mb_per_s},
                 {"file_write_fsync_ms", r.file_write_fsync_ms},
                 {"file_read_ms", r.file_read_ms},
                 {"put_vs_file", r.put_p50_ms / r.file_write_fsync_ms},
                 {"get_vs_file", r.get_p50_ms / r.file_read_ms}});
      continue;
    }
    std::printf(
        "%10lld %9.2f %9.2f %11.2f %7.2fx %9.2f %9.2f %9.2f %7.2fx %11.2f "
        "%11.2f\n",
        static_cast<long long>(r.bytes), r.put_p50_ms, r.put_p99_ms,
        r.file_write_fsync_ms, r.put_p50_ms / r.file_write_fsync_ms,
        r.get_p50_ms, r.get_p99_ms, r.file_read_ms,
        r.get_p50_ms / r.file_read_ms, r.get_uncached_p50_ms,
        r.get_uncached_p99_ms);
  }
  return 0;
}

}  // namespace twice::bench
