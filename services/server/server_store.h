// The store a twice-server process opens, by --store and --store_address:
// the embedded RocksDB store (roles all and store, and any role without a
// store address), the store role at --store_address, or a Ceph cluster
// (--store=rados, every role but store; storage/rados/rados_store.h).
#ifndef TWICE_SERVICES_SERVER_SERVER_STORE_H_
#define TWICE_SERVICES_SERVER_SERVER_STORE_H_

#include <grpcpp/channel.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "services/server/server_options.h"
#include "storage/store.h"
#if TWICE_HAVE_RADOS
#include "storage/rados/rados_store.h"
#endif

namespace twice::services {

// Opens it; `connect` makes the internal channel to a store role's
// address. FAILED_PRECONDITION for --store=rados in a build without
// librados.
[[nodiscard]] absl::StatusOr<std::unique_ptr<storage::Store>> OpenServerStore(
    const ServerOptions& options,
    const std::function<std::shared_ptr<grpc::Channel>(const std::string&)>&
        connect);

#if TWICE_HAVE_RADOS
// The RADOS store the --rados_* flags of `options` name.
storage::RadosStoreOptions RadosStoreOptionsOf(const ServerOptions& options);
#endif

}  // namespace twice::services

#endif  // TWICE_SERVICES_SERVER_SERVER_STORE_H_
