#include "services/server/server_store.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/common/log.h"
#include "services/store/remote_state_store.h"
#include "storage/rocksdb_store.h"

namespace twice::services {
namespace {

absl::StatusOr<std::unique_ptr<storage::Store>> OpenRados(
    const ServerOptions& options) {
#if TWICE_HAVE_RADOS
  absl::StatusOr<std::unique_ptr<storage::Store>> store =
      storage::OpenRadosStore(RadosStoreOptionsOf(options));
  if (!store.ok()) {
    return absl::Status(
        store.status().code(),
        absl::StrCat("opening the RADOS store of ", options.rados_conf, ": ",
                     store.status().message()));
  }
  Log(LogLevel::kInfo, "store.rados",
      absl::StrCat("conf=", LogValue(options.rados_conf),
                   " user=", LogValue(options.rados_user), " pools=",
                   LogValue(options.rados_pool_prefix), "-{meta,states}"));
  return store;
#else
  (void)options;
  return absl::FailedPreconditionError(
      "--store=rados needs a build with librados (scripts/setup.sh --ceph, "
      "then rebuild)");
#endif
}

absl::StatusOr<std::unique_ptr<storage::Store>> OpenEmbedded(
    const ServerOptions& options) {
  storage::RocksDbStoreOptions store_options;
  store_options.path = options.data_dir;
  store_options.sync_writes = options.sync_writes;
  store_options.state_budget_bytes = options.state_budget_bytes;
  store_options.tenant_state_budget_bytes = options.tenant_state_budget_bytes;
  store_options.min_free_disk_bytes = options.store_min_free_disk_bytes;
  store_options.state_cache_bytes = options.store_state_cache_bytes;
  absl::StatusOr<std::unique_ptr<storage::Store>> store =
      storage::OpenRocksDbStore(store_options);
  if (!store.ok()) {
    return absl::Status(store.status().code(),
                        absl::StrCat("opening the store in ", options.data_dir,
                                     ": ", store.status().message()));
  }
  return store;
}

}  // namespace

#if TWICE_HAVE_RADOS
storage::RadosStoreOptions RadosStoreOptionsOf(const ServerOptions& options) {
  storage::RadosStoreOptions rados;
  rados.cluster.conf_file = options.rados_conf;
  rados.cluster.user = options.rados_user;
  rados.cluster.op_timeout =
      std::chrono::seconds(options.rados_op_timeout_seconds);
  rados.pool_prefix = options.rados_pool_prefix;
  return rados;
}
#endif

absl::StatusOr<std::unique_ptr<storage::Store>> OpenServerStore(
    const ServerOptions& options,
    const std::function<std::shared_ptr<grpc::Channel>(const std::string&)>&
        connect) {
  if (options.store == "rados") return OpenRados(options);
  if (options.role == Role::kStore || options.store_address.empty()) {
    return OpenEmbedded(options);
  }
  return std::unique_ptr<storage::Store>(std::make_unique<RemoteStateStore>(
      connect(options.store_address),
      std::chrono::seconds(options.store_timeout_seconds)));
}

}  // namespace twice::services
