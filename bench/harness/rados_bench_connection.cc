#if TWICE_HAVE_RADOS
#include "bench/harness/rados_bench_connection.h"

#include <utility>

namespace twice::bench {

absl::StatusOr<RadosBenchConnection> ConnectRadosBench(
    const RadosStoreBenchOptions& options, RadosBenchPool pool) {
  if (options.iterations < 1) {
    return absl::InvalidArgumentError("iterations must be >= 1");
  }
  RadosBenchConnection connection;
  connection.store_options.cluster.conf_file = options.conf_file;
  connection.store_options.cluster.user = options.user;
  connection.store_options.pool_prefix = options.pool_prefix;
  absl::StatusOr<std::unique_ptr<storage::Store>> store =
      storage::OpenRadosStore(connection.store_options);
  if (!store.ok()) return store.status();
  connection.store = *std::move(store);
  absl::StatusOr<std::unique_ptr<storage::RadosCluster>> cluster =
      storage::RadosCluster::Connect(connection.store_options.cluster);
  if (!cluster.ok()) return cluster.status();
  connection.raw_cluster = *std::move(cluster);
  absl::StatusOr<librados::IoCtx> io = connection.raw_cluster->OpenPool(
      pool == RadosBenchPool::kStates
          ? storage::RadosStatesPool(connection.store_options)
          : storage::RadosMetaPool(connection.store_options),
      /*create=*/false);
  if (!io.ok()) return io.status();
  connection.raw_pool = *std::move(io);
  return connection;
}

}  // namespace twice::bench
#endif  // TWICE_HAVE_RADOS
