// RadosJanitor: what a RADOS store needs done that RADOS does not do for a
// cache, run by one process of the deployment (twice-server
// --role=janitor) at a time:
//   - the byte budget: when the states pool holds more than the budget,
//     states are deleted lowest score first, with the RocksDB store's
//     cost/recency score (state_cache_index.h; recency by write time, since
//     reads leave no trace in RADOS), never one a pinned record names;
//   - garbage: states and tokens objects no record names, and blocks no
//     manifest names, once older than the grace period (a write in flight
//     stores its objects before the record that names them);
//   - verify (optional): every state read and checked (a bad one deleted,
//     as a read would), every record and tokens object decoded.
//
// One at a time: the janitor holds an exclusive librados lock on the meta
// pool's janitor.lock object for a lease it renews between the steps of a
// pass. Another janitor's Acquire fails until the lease runs out, so when
// the active one dies the next takes over within one lease; a pass that
// finds its lease lost stops (ABORTED) before deleting anything more.
#ifndef TWICE_STORAGE_RADOS_RADOS_JANITOR_H_
#define TWICE_STORAGE_RADOS_RADOS_JANITOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "storage/rados/rados_cluster.h"
#include "storage/rados/rados_document_catalog.h"
#include "storage/rados/rados_state_store.h"
#include "storage/rados/rados_store.h"

namespace twice::storage {

struct JanitorOptions {
  // How long the lock outlives a janitor that stopped renewing it.
  // Default: 30 s.
  std::chrono::seconds lease{30};
  // Unnamed objects younger than this are left alone. Default: 1 h.
  std::chrono::seconds grace{3600};
  // Bytes of state values (blocks included) the states pool may hold; 0 =
  // unbounded. Default: 0.
  int64_t state_budget_bytes = 0;
  // As RocksDbStoreOptions::eviction_cost_weight. Default: 1.
  double eviction_cost_weight = 1.0;
  // Read and check every value each pass. Default: false.
  bool verify = false;
};

// What one pass found and did.
struct JanitorReport {
  int64_t tenants = 0;
  int64_t documents = 0;
  int64_t states = 0;  // whole states and manifests, before the pass
  int64_t blocks = 0;
  int64_t state_bytes = 0;  // states and blocks, after the pass
  int64_t pinned_states = 0;
  int64_t orphan_states = 0;  // deleted: named by no record
  int64_t orphan_blocks = 0;  // deleted: named by no manifest
  int64_t orphan_tokens = 0;  // deleted: tokens objects no record names
  int64_t evicted_states = 0;
  int64_t evicted_bytes = 0;
  // verify only: values found bad (states deleted; records and tokens
  // reported, since they are the truth and cannot be recomputed).
  int64_t bad_states = 0;
  int64_t bad_records = 0;
  int64_t bad_tokens = 0;
};

class RadosJanitor {
 public:
  // Connects to the store's cluster and pools (created when missing).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RadosJanitor>> Open(
      const RadosStoreOptions& store, const JanitorOptions& options);
  // Releases the lock when held.
  ~RadosJanitor();

  // Takes or renews the lease: true while this janitor is the active one,
  // false when another holds it.
  [[nodiscard]] absl::StatusOr<bool> Acquire();
  // One pass over the whole store. FAILED_PRECONDITION unless Acquire
  // returned true; ABORTED when the lease is lost midway.
  [[nodiscard]] absl::StatusOr<JanitorReport> RunPass();
  bool active() const { return active_; }

 private:
  struct Scan;

  RadosJanitor(std::unique_ptr<RadosCluster> cluster,
               const JanitorOptions& options)
      : cluster_(std::move(cluster)), options_(options) {}

  absl::Status ScanIndex(Scan& scan);
  absl::Status ScanStates(Scan& scan);
  absl::Status CollectGarbage(Scan& scan, JanitorReport& report);
  absl::Status KeepBudget(Scan& scan, JanitorReport& report);
  absl::Status VerifyValues(Scan& scan, JanitorReport& report);
  // Renews the lease; ABORTED when it was lost.
  absl::Status StillActive();

  std::unique_ptr<RadosCluster> cluster_;
  JanitorOptions options_;
  librados::IoCtx meta_;
  librados::IoCtx states_pool_;
  std::unique_ptr<RadosStateStore> states_;
  std::unique_ptr<RadosDocumentCatalog> catalog_;
  std::string cookie_;
  bool active_ = false;
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_RADOS_RADOS_JANITOR_H_
