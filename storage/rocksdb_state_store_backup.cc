// Backup and restore of RocksDbStateStore: an online RocksDB checkpoint, and
// an offline copy of one back into an empty directory.
#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "rocksdb/utilities/checkpoint.h"
#include "storage/rocksdb_state_store.h"
#include "storage/rocksdb_status.h"

namespace twice::storage {
namespace {

namespace fs = std::filesystem;

// Files and bytes under `dir`.
void CountFiles(const fs::path& dir, int64_t* files, int64_t* bytes) {
  std::error_code ec;
  for (const fs::directory_entry& entry :
       fs::recursive_directory_iterator(dir, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    *files += 1;
    *bytes += static_cast<int64_t>(entry.file_size(ec));
  }
}

}  // namespace

absl::StatusOr<BackupReport> RocksDbStateStore::Backup(const std::string& dir) {
  if (dir.empty())
    return absl::InvalidArgumentError("backup directory is empty");
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    return absl::AlreadyExistsError(
        absl::StrCat("backup directory ", dir, " already exists"));
  }
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status s = rocksdb::Checkpoint::Create(db_.get(), &raw);
  if (!s.ok()) return FromRocksDb(s, "create checkpoint");
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // Flushing first puts everything in table and blob files, so the
  // checkpoint needs no WAL replay; the WAL is copied as well either way.
  s = checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0);
  if (!s.ok()) return FromRocksDb(s, absl::StrCat("checkpoint into ", dir));
  BackupReport report;
  report.path = dir;
  CountFiles(dir, &report.files, &report.bytes);
  const StoreStats stats = Stats();
  report.document_count = stats.document_count;
  report.state_count = stats.state_count;
  return report;
}

absl::StatusOr<VerifyReport> RestoreRocksDbStore(
    const std::string& backup_dir, const RocksDbStoreOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(backup_dir, ec) ||
      !fs::exists(fs::path(backup_dir) / "CURRENT", ec)) {
    return absl::NotFoundError(
        absl::StrCat(backup_dir, " is not a store backup (no CURRENT file)"));
  }
  if (options.path.empty()) {
    return absl::InvalidArgumentError("restore: the data directory is empty");
  }
  if (fs::exists(options.path, ec) && !fs::is_empty(options.path, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("restore: ", options.path,
                     " is not empty; restore into a new directory"));
  }
  fs::create_directories(options.path, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("restore: create ", options.path, ": ", ec.message()));
  }
  fs::copy(backup_dir, options.path, fs::copy_options::recursive, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("restore: copy ", backup_dir,
                                               " to ", options.path, ": ",
                                               ec.message()));
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(options);
  if (!store.ok()) return store.status();
  return (*store)->Verify(VerifyOptions());
}

}  // namespace twice::storage
