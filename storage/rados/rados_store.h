// The Store (storage/store.h) of a deployment past one machine: states in
// `<prefix>-states` (RadosStateStore) and documents in `<prefix>-meta`
// (RadosDocumentCatalog) of one Ceph cluster, which every prefill, decode
// and orchestrator process opens directly. Selected by --store=rados.
//
// Administration is split the way the cluster is: RADOS replicates,
// recovers, scrubs and compacts its own objects, so Compact and Backup
// answer UNIMPLEMENTED naming what to use instead (BlueStore compacts
// itself; pool snapshots), and the byte budget, garbage collection and
// verification of Twice's values are the janitor's (--role=janitor).
#ifndef TWICE_STORAGE_RADOS_RADOS_STORE_H_
#define TWICE_STORAGE_RADOS_RADOS_STORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "storage/rados/rados_cluster.h"
#include "storage/rados/rados_record_watch.h"
#include "storage/store.h"

namespace twice::storage {

struct RadosStoreOptions {
  RadosOptions cluster;
  // Pools are `<prefix>-states` and `<prefix>-meta`, created when missing.
  // Default: "twice".
  std::string pool_prefix = "twice";
  // How readers trust kept records and writers announce changes.
  RecordWatchOptions record_watch;
};

// Connects and opens (creating when missing) both pools.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Store>> OpenRadosStore(
    const RadosStoreOptions& options);

std::string RadosStatesPool(const RadosStoreOptions& options);
std::string RadosMetaPool(const RadosStoreOptions& options);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_RADOS_RADOS_STORE_H_
