#include "bench/harness/rados_store_benchmark.h"

#if TWICE_HAVE_RADOS
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "bench/harness/bench_common.h"
#include "bench/harness/rados_bench_connection.h"
#include "storage/rados/rados_status.h"
#endif

namespace twice::bench {

#if TWICE_HAVE_RADOS
absl::StatusOr<std::vector<RadosStoreBenchRow>> RunRadosStoreBenchmark(
    const RadosStoreBenchOptions& options) {
  absl::StatusOr<RadosBenchConnection> connection =
      ConnectRadosBench(options, RadosBenchPool::kStates);
  if (!connection.ok()) return connection.status();
  storage::Store* store = connection->store.get();
  librados::IoCtx* pool = &connection->raw_pool;

  std::mt19937_64 rng(std::random_device{}());
  const std::string run = absl::StrCat(absl::Hex(rng()));
  std::vector<RadosStoreBenchRow> rows;
  for (const int64_t bytes : options.sizes_bytes) {
    std::string blob(static_cast<size_t>(bytes), '\0');
    for (char& c : blob) c = static_cast<char>(rng());
    std::vector<double> puts, raw_puts, gets, raw_gets;
    std::vector<storage::StateKey> keys;
    std::vector<std::string> raw_names;
    // Alternated, so drift in the machine's load falls on both clients.
    for (int i = 0; i < options.iterations; ++i) {
      const storage::StateKey key =
          storage::ChainKey(storage::RootKey("bench", run, "bench"),
                            {static_cast<int32_t>(bytes >> 10), i});
      storage::PutStateOptions put;
      put.tenant = "bench";
      auto start = std::chrono::steady_clock::now();
      if (absl::Status s = store->PutState(key, blob, put); !s.ok()) {
        return s;
      }
      puts.push_back(MillisSince(start));
      keys.push_back(key);

      const std::string name = absl::StrCat("raw.", run, ".", bytes, ".", i);
      // A bufferlist per write: librados may take its buffers.
      ceph::bufferlist raw_bytes;
      raw_bytes.append(blob);
      start = std::chrono::steady_clock::now();
      if (int r = pool->write_full(name, raw_bytes); r < 0) {
        return storage::FromRados(r, "raw write");
      }
      raw_puts.push_back(MillisSince(start));
      raw_names.push_back(name);
    }
    for (int i = 0; i < options.iterations; ++i) {
      auto start = std::chrono::steady_clock::now();
      absl::StatusOr<std::string> got = store->GetState(keys[i]);
      if (!got.ok()) return got.status();
      gets.push_back(MillisSince(start));

      ceph::bufferlist read;
      start = std::chrono::steady_clock::now();
      if (int r = pool->read(raw_names[i], read, 0, 0); r < 0) {
        return storage::FromRados(r, "raw read");
      }
      raw_gets.push_back(MillisSince(start));
      if (static_cast<int64_t>(read.length()) != bytes ||
          static_cast<int64_t>(got->size()) != bytes) {
        return absl::InternalError("a read returned the wrong size");
      }
    }
    for (const storage::StateKey& key : keys) {
      (void)store->DeleteState(key);
    }
    for (const std::string& name : raw_names) (void)pool->remove(name);
    rows.push_back({.bytes = bytes,
                    .iterations = options.iterations,
                    .put_p50_ms = Percentile(puts, 0.5),
                    .raw_put_p50_ms = Percentile(raw_puts, 0.5),
                    .get_p50_ms = Percentile(gets, 0.5),
                    .raw_get_p50_ms = Percentile(raw_gets, 0.5)});
  }
  return rows;
}

#else

absl::StatusOr<std::vector<RadosStoreBenchRow>> RunRadosStoreBenchmark(
    const RadosStoreBenchOptions& options) {
  (void)options;
  return RadosBenchUnavailable();
}

#endif

absl::Status RadosBenchUnavailable() {
  return absl::FailedPreconditionError(
      "twice-bench store --store=rados needs a build with librados "
      "(scripts/setup.sh --ceph, then rebuild)");
}

}  // namespace twice::bench
