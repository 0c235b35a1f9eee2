// twice store stats|verify|compact|gc: administration of the state store of
// a server running role `all` or `store` (the Store gRPC API).
//
//   twice store stats                   counters, budget and disk use
//   twice store verify [--repair]       read and verify every stored value;
//                                       exit code 1 when any is bad
//   twice store compact                 compact every column family
//   twice store gc                      drop expired and orphaned values,
//                                       reclaim blob file space
//   twice store backup NAME             write a consistent checkpoint into
//                                       NAME under the server's --backup-dir
//   twice store restore BACKUP_DIR --data-dir=DIR
//                                       offline (no server): copy a backup
//                                       into the new data directory DIR and
//                                       verify it; start the server on DIR
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "services/cli/commands.h"
#include "services/common/grpc_status.h"
#include "storage/rocksdb_store.h"
#include "twice/v1/store.grpc.pb.h"

ABSL_FLAG(bool, repair, false,
          "store verify: delete bad states and rebuild bad refs");
ABSL_FLAG(std::string, data_dir, "",
          "store restore: the new data directory to restore into (must be "
          "missing or empty; no server may use it)");

namespace twice::cli {
namespace {

constexpr char kUsage[] =
    "usage: twice store stats|verify|compact|gc | backup NAME | restore "
    "BACKUP_DIR --data-dir=DIR";

int CallFailed(const CliContext& cli, const grpc::Status& status) {
  return ReportError(cli, services::FromGrpcStatus(status));
}

int Stats(const CliContext& cli, v1::Store::Stub& stub) {
  std::unique_ptr<grpc::ClientContext> call = cli.NewCall();
  v1::StoreStats s;
  grpc::Status status = stub.Stats(call.get(), v1::StoreStatsRequest(), &s);
  if (!status.ok()) return CallFailed(cli, status);
  const nlohmann::json json = {{"state_bytes", s.state_bytes()},
                               {"budget_bytes", s.budget_bytes()},
                               {"state_count", s.state_count()},
                               {"block_count", s.block_count()},
                               {"pinned_state_count", s.pinned_state_count()},
                               {"document_count", s.document_count()},
                               {"disk_bytes", s.disk_bytes()},
                               {"hits", s.hits()},
                               {"misses", s.misses()},
                               {"evictions", s.evictions()},
                               {"evicted_bytes", s.evicted_bytes()},
                               {"corruptions", s.corruptions()},
                               {"catalog_corruptions", s.catalog_corruptions()},
                               {"recomputes", s.recomputes()}};
  if (cli.json) {
    PrintJson(json);
    return 0;
  }
  for (const auto& [name, value] : json.items()) {
    std::printf("%-20s %lld\n", name.c_str(),
                static_cast<long long>(value.get<int64_t>()));
  }
  return 0;
}

int Verify(const CliContext& cli, v1::Store::Stub& stub) {
  std::unique_ptr<grpc::ClientContext> call = cli.NewCall();
  v1::VerifyStoreRequest request;
  request.set_repair(absl::GetFlag(FLAGS_repair));
  v1::VerifyStoreResponse r;
  grpc::Status status = stub.Verify(call.get(), request, &r);
  if (!status.ok()) return CallFailed(cli, status);
  nlohmann::json bad = nlohmann::json::array();
  for (const v1::BadStoreValue& value : r.bad()) {
    bad.push_back({{"family", value.family()},
                   {"key", value.key()},
                   {"reason", value.reason()}});
  }
  if (cli.json) {
    PrintJson({{"states_checked", r.states_checked()},
               {"documents_checked", r.documents_checked()},
               {"refs_checked", r.refs_checked()},
               {"bytes_checked", r.bytes_checked()},
               {"bad", bad},
               {"repaired", r.repaired()}});
  } else {
    std::printf(
        "checked %lld states, %lld documents, %lld refs (%lld bytes): %d "
        "bad, %lld repaired\n",
        static_cast<long long>(r.states_checked()),
        static_cast<long long>(r.documents_checked()),
        static_cast<long long>(r.refs_checked()),
        static_cast<long long>(r.bytes_checked()), r.bad_size(),
        static_cast<long long>(r.repaired()));
    for (const v1::BadStoreValue& value : r.bad()) {
      std::printf("bad %s %s: %s\n", value.family().c_str(),
                  value.key().c_str(), value.reason().c_str());
    }
  }
  return r.bad_size() == 0 ? 0 : 1;
}

int Compact(const CliContext& cli, v1::Store::Stub& stub) {
  std::unique_ptr<grpc::ClientContext> call = cli.NewCall();
  v1::CompactStoreResponse r;
  grpc::Status status = stub.Compact(call.get(), v1::CompactStoreRequest(), &r);
  if (!status.ok()) return CallFailed(cli, status);
  if (cli.json) {
    PrintJson({{"disk_bytes_before", r.disk_bytes_before()},
               {"disk_bytes_after", r.disk_bytes_after()}});
  } else {
    std::printf("compacted: %lld -> %lld disk bytes\n",
                static_cast<long long>(r.disk_bytes_before()),
                static_cast<long long>(r.disk_bytes_after()));
  }
  return 0;
}

int Gc(const CliContext& cli, v1::Store::Stub& stub) {
  std::unique_ptr<grpc::ClientContext> call = cli.NewCall();
  v1::GcStoreResponse r;
  grpc::Status status = stub.Gc(call.get(), v1::GcStoreRequest(), &r);
  if (!status.ok()) return CallFailed(cli, status);
  if (cli.json) {
    PrintJson({{"orphan_refs", r.orphan_refs()},
               {"orphan_blocks", r.orphan_blocks()},
               {"disk_bytes_before", r.disk_bytes_before()},
               {"disk_bytes_after", r.disk_bytes_after()}});
  } else {
    std::printf(
        "gc: %lld orphaned refs, %lld orphaned blocks; %lld -> %lld disk "
        "bytes\n",
        static_cast<long long>(r.orphan_refs()),
        static_cast<long long>(r.orphan_blocks()),
        static_cast<long long>(r.disk_bytes_before()),
        static_cast<long long>(r.disk_bytes_after()));
  }
  return 0;
}

int Backup(const CliContext& cli, v1::Store::Stub& stub,
           const std::string& name) {
  std::unique_ptr<grpc::ClientContext> call = cli.NewCall();
  v1::BackupStoreRequest request;
  request.set_name(name);
  v1::BackupStoreResponse r;
  grpc::Status status = stub.Backup(call.get(), request, &r);
  if (!status.ok()) return CallFailed(cli, status);
  if (cli.json) {
    PrintJson({{"path", r.path()},
               {"files", r.files()},
               {"bytes", r.bytes()},
               {"document_count", r.document_count()},
               {"state_count", r.state_count()}});
  } else {
    std::printf(
        "backup: %s (%lld files, %lld bytes, %lld documents, %lld "
        "states)\n",
        r.path().c_str(), static_cast<long long>(r.files()),
        static_cast<long long>(r.bytes()),
        static_cast<long long>(r.document_count()),
        static_cast<long long>(r.state_count()));
  }
  return 0;
}

// Offline: the restored directory is opened here, so no server may own it.
int Restore(const CliContext& cli, const std::string& backup_dir) {
  storage::RocksDbStoreOptions options;
  options.path = absl::GetFlag(FLAGS_data_dir);
  if (options.path.empty()) {
    return ReportError(
        cli, absl::InvalidArgumentError("store restore needs --data-dir=DIR"));
  }
  absl::StatusOr<storage::VerifyReport> report =
      storage::RestoreRocksDbStore(backup_dir, options);
  if (!report.ok()) return ReportError(cli, report.status());
  if (cli.json) {
    PrintJson({{"data_dir", options.path},
               {"documents_checked", report->documents_checked},
               {"states_checked", report->states_checked},
               {"bytes_checked", report->bytes_checked},
               {"bad", static_cast<int64_t>(report->bad.size())}});
  } else {
    std::printf("restored %s into %s: %lld documents, %lld states, %zu bad\n",
                backup_dir.c_str(), options.path.c_str(),
                static_cast<long long>(report->documents_checked),
                static_cast<long long>(report->states_checked),
                report->bad.size());
  }
  return report->bad.empty() ? 0 : 1;
}

}  // namespace

int RunStore(const CliContext& cli) {
  if (cli.args.size() == 2 && cli.args[0] == "restore") {
    return Restore(cli, cli.args[1]);
  }
  if (cli.args.size() == 2 && cli.args[0] == "backup") {
    auto stub = v1::Store::NewStub(cli.Connect());
    return Backup(cli, *stub, cli.args[1]);
  }
  if (cli.args.size() != 1) {
    return ReportError(cli, absl::InvalidArgumentError(kUsage));
  }
  auto stub = v1::Store::NewStub(cli.Connect());
  const std::string& what = cli.args[0];
  if (what == "stats") return Stats(cli, *stub);
  if (what == "verify") return Verify(cli, *stub);
  if (what == "compact") return Compact(cli, *stub);
  if (what == "gc") return Gc(cli, *stub);
  return ReportError(cli, absl::InvalidArgumentError(kUsage));
}

}  // namespace twice::cli
