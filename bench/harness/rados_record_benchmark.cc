#include "bench/harness/rados_record_benchmark.h"

#if TWICE_HAVE_RADOS
#include <cerrno>
#include <chrono>
#include <map>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "bench/harness/bench_common.h"
#include "bench/harness/rados_bench_connection.h"
#include "storage/rados/rados_status.h"
#include "storage/record_codec.h"
#include "storage/record_watch.h"
#endif

namespace twice::bench {

#if TWICE_HAVE_RADOS
namespace {

constexpr int kWatcherCounts[] = {0, 1, 4};

}  // namespace

absl::StatusOr<std::vector<RadosRecordBenchRow>> RunRadosRecordBenchmark(
    const RadosStoreBenchOptions& options) {
  absl::StatusOr<RadosBenchConnection> connection =
      ConnectRadosBench(options, RadosBenchPool::kMeta);
  if (!connection.ok()) return connection.status();
  const storage::RadosStoreOptions& store_options = connection->store_options;
  storage::Store* writer = connection->store.get();
  librados::IoCtx* meta = &connection->raw_pool;

  std::mt19937_64 rng(std::random_device{}());
  const std::string run = absl::StrCat(absl::Hex(rng()));
  storage::DocumentRecord record;
  record.tenant = "bench";
  record.document_id = "record-bench-" + run;
  record.model = "bench";
  record.model_fingerprint = "bench";
  record.token_count = 16;
  record.segment_tokens = 16;
  record.created_unix_ms = 1;
  const std::vector<int32_t> tokens(16, 7);
  if (absl::Status s = writer->PutDocument(record, tokens); !s.ok()) {
    return s;
  }
  const storage::DocumentRef ref = storage::RefOf(record);
  const std::string raw_object = "raw-record." + run;

  std::vector<std::unique_ptr<storage::Store>> watchers;
  std::vector<RadosRecordBenchRow> rows;
  for (const int count : kWatcherCounts) {
    while (static_cast<int>(watchers.size()) < count) {
      absl::StatusOr<std::unique_ptr<storage::Store>> watcher =
          storage::OpenRadosStore(store_options);
      if (!watcher.ok()) return watcher.status();
      absl::StatusOr<storage::RecordWatch::Mark> mark =
          (*watcher)->record_watch()->Begin(ref);
      if (!mark.ok()) return mark.status();
      watchers.push_back(*std::move(watcher));
    }
    std::vector<double> commits, raws;
    for (int i = 0; i < options.iterations; ++i) {
      absl::StatusOr<storage::DocumentRecord> stored = writer->GetDocument(ref);
      if (!stored.ok()) return stored.status();
      stored->accessed_unix_ms = 1000 + i;
      auto start = std::chrono::steady_clock::now();
      if (absl::Status s = writer->UpdateDocument(*stored); !s.ok()) {
        return s;
      }
      commits.push_back(MillisSince(start));

      const std::string value = storage::EncodeRecord(*stored);
      start = std::chrono::steady_clock::now();
      librados::ObjectReadOperation read;
      std::map<std::string, ceph::bufferlist> values;
      int read_result = 0;
      read.omap_get_vals_by_keys({"r"}, &values, &read_result);
      if (int r = meta->operate(raw_object, &read, nullptr);
          r < 0 && r != -ENOENT) {
        return storage::FromRados(r, "raw omap read");
      }
      librados::ObjectWriteOperation write;
      ceph::bufferlist bytes;
      bytes.append(value);
      write.omap_set({{"r", bytes}});
      if (int r = meta->operate(raw_object, &write); r < 0) {
        return storage::FromRados(r, "raw omap write");
      }
      raws.push_back(MillisSince(start));
    }
    rows.push_back({.watchers = count,
                    .iterations = options.iterations,
                    .commit_p50_ms = Percentile(commits, 0.5),
                    .raw_p50_ms = Percentile(raws, 0.5)});
  }
  watchers.clear();
  (void)writer->DeleteDocument(ref);
  (void)meta->remove(raw_object);
  return rows;
}

#else

absl::StatusOr<std::vector<RadosRecordBenchRow>> RunRadosRecordBenchmark(
    const RadosStoreBenchOptions& options) {
  (void)options;
  return RadosBenchUnavailable();
}

#endif

}  // namespace twice::bench
