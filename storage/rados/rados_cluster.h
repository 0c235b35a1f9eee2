// RadosCluster: one connection to a Ceph cluster through librados, and its
// pools. Every OSD and monitor operation has a deadline (op_timeout), so a
// paused, full or partitioned cluster answers UNAVAILABLE instead of
// blocking the caller.
#ifndef TWICE_STORAGE_RADOS_RADOS_CLUSTER_H_
#define TWICE_STORAGE_RADOS_RADOS_CLUSTER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <rados/librados.hpp>
#include <string>

#include "absl/status/statusor.h"

namespace twice::storage {

struct RadosOptions {
  // ceph.conf of the cluster (monitor addresses, auth). Required.
  std::string conf_file;
  // The cephx user, without "client.". Default: "admin".
  std::string user = "admin";
  // Deadline of every OSD and monitor operation. A timed-out write may
  // still have been applied (rados_status.h). Default: 10 s.
  std::chrono::seconds op_timeout{10};
};

// A pool's size as the cluster last reported it (not counting replicas).
struct PoolUsage {
  int64_t bytes = 0;
  int64_t objects = 0;
};

class RadosCluster {
 public:
  // Connects within op_timeout. UNAVAILABLE when no monitor answers;
  // INVALID_ARGUMENT for a conf file that does not parse.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RadosCluster>> Connect(
      const RadosOptions& options);
  ~RadosCluster();
  RadosCluster(const RadosCluster&) = delete;
  RadosCluster& operator=(const RadosCluster&) = delete;

  // An I/O context on pool `name`. A missing pool is created first when
  // `create` (replicated, with the cluster's default size), else NOT_FOUND.
  [[nodiscard]] absl::StatusOr<librados::IoCtx> OpenPool(
      const std::string& name, bool create);
  // The usage of pool `name` (NOT_FOUND when it does not exist).
  [[nodiscard]] absl::StatusOr<PoolUsage> Usage(const std::string& name);
  // Waits until no watch callback (librados::WatchCtx2) of this connection
  // is running or queued; after unwatching, before freeing a callback.
  void FlushWatchCallbacks() { (void)rados_.watch_flush(); }

 private:
  RadosCluster() = default;

  librados::Rados rados_;
  bool connected_ = false;
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_RADOS_RADOS_CLUSTER_H_
