#include "storage/rados/rados_cluster.h"

#include <cerrno>
#include <list>
#include <string>

#include "absl/strings/str_cat.h"
#include "storage/rados/rados_status.h"

namespace twice::storage {

absl::StatusOr<std::unique_ptr<RadosCluster>> RadosCluster::Connect(
    const RadosOptions& options) {
  if (options.conf_file.empty()) {
    return absl::InvalidArgumentError("the RADOS store needs a ceph.conf");
  }
  std::unique_ptr<RadosCluster> cluster(new RadosCluster());
  librados::Rados& rados = cluster->rados_;
  const std::string name = "client." + options.user;
  if (int r = rados.init2(name.c_str(), "ceph", 0); r < 0) {
    return FromRados(r, absl::StrCat("initializing RADOS as ", name));
  }
  if (int r = rados.conf_read_file(options.conf_file.c_str()); r < 0) {
    absl::Status read =
        FromRados(r, absl::StrCat("reading ", options.conf_file));
    return absl::Status(r == -ENOENT ? absl::StatusCode::kNotFound
                                     : absl::StatusCode::kInvalidArgument,
                        read.message());
  }
  const std::string timeout = std::to_string(options.op_timeout.count());
  // Operations fail after the timeout instead of waiting for the cluster
  // to come back; connecting gives up after it too.
  for (const char* option : {"rados_osd_op_timeout", "rados_mon_op_timeout",
                             "client_mount_timeout"}) {
    if (int r = rados.conf_set(option, timeout.c_str()); r < 0) {
      return FromRados(r, absl::StrCat("setting ", option));
    }
  }
  if (int r = rados.connect(); r < 0) {
    return FromRados(r, absl::StrCat("connecting to the Ceph cluster of ",
                                     options.conf_file));
  }
  cluster->connected_ = true;
  return cluster;
}

RadosCluster::~RadosCluster() {
  if (connected_) rados_.shutdown();
}

absl::StatusOr<librados::IoCtx> RadosCluster::OpenPool(const std::string& name,
                                                       bool create) {
  librados::IoCtx io;
  int r = rados_.ioctx_create(name.c_str(), io);
  if (r == -ENOENT && create) {
    r = rados_.pool_create(name.c_str());
    // Another client may have created it meanwhile.
    if (r < 0 && r != -EEXIST) {
      return FromRados(r, absl::StrCat("creating pool ", name));
    }
    r = rados_.ioctx_create(name.c_str(), io);
    // Tagged with its user, as Ceph asks of every pool (else HEALTH_WARN).
    if (r >= 0) {
      if (int tagged = io.application_enable("twice", /*force=*/false);
          tagged < 0 && tagged != -EEXIST) {
        return FromRados(tagged, absl::StrCat("tagging pool ", name));
      }
    }
  }
  if (r < 0) return FromRados(r, absl::StrCat("opening pool ", name));
  return io;
}

absl::StatusOr<PoolUsage> RadosCluster::Usage(const std::string& name) {
  std::list<std::string> pools = {name};
  librados::stats_map stats;
  if (int r = rados_.get_pool_stats(pools, stats); r < 0) {
    return FromRados(r, absl::StrCat("reading the usage of pool ", name));
  }
  auto it = stats.find(name);
  if (it == stats.end()) {
    return absl::NotFoundError(absl::StrCat("pool ", name, " not found"));
  }
  return PoolUsage{.bytes = static_cast<int64_t>(it->second.num_bytes),
                   .objects = static_cast<int64_t>(it->second.num_objects)};
}

}  // namespace twice::storage
