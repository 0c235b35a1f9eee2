// What the RADOS benchmarks (rados_store_benchmark.h,
// rados_record_benchmark.h) both start from: the store under test and a
// second, raw librados connection to one of its pools, for the reference
// operations. Only in builds with librados.
#ifndef TWICE_BENCH_HARNESS_RADOS_BENCH_CONNECTION_H_
#define TWICE_BENCH_HARNESS_RADOS_BENCH_CONNECTION_H_

#include <memory>
#include <rados/librados.hpp>

#include "absl/status/statusor.h"
#include "bench/harness/rados_store_benchmark.h"
#include "storage/rados/rados_cluster.h"
#include "storage/rados/rados_store.h"

namespace twice::bench {

enum class RadosBenchPool { kStates, kMeta };

struct RadosBenchConnection {
  storage::RadosStoreOptions store_options;
  std::unique_ptr<storage::Store> store;
  std::unique_ptr<storage::RadosCluster> raw_cluster;
  librados::IoCtx raw_pool;  // `pool` of the store, through raw_cluster
};

// INVALID_ARGUMENT for fewer than one iteration; the store's and the
// cluster's errors otherwise.
[[nodiscard]] absl::StatusOr<RadosBenchConnection> ConnectRadosBench(
    const RadosStoreBenchOptions& options, RadosBenchPool pool);

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_RADOS_BENCH_CONNECTION_H_
