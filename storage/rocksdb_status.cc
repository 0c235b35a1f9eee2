#include "storage/rocksdb_status.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "storage/absl_view.h"

namespace twice::storage {
namespace {

// RocksDB reports a held LOCK file as a plain IOError, so the message is all
// there is to go on. PosixEnv::LockFile writes "While lock file: <dir>/LOCK:
// <strerror>" when another process holds the fcntl lock, and "lock hold by
// current process" when this process already opened the directory.
bool IsLockHeld(const rocksdb::Status& status, const std::string& message) {
  return status.IsIOError() &&
         (absl::StrContains(message, "While lock file") ||
          absl::StrContains(message, "lock hold by current process"));
}

absl::StatusCode MapCode(const rocksdb::Status& status,
                         const std::string& message) {
  if (status.IsNotFound()) return absl::StatusCode::kNotFound;
  if (status.IsCorruption()) return absl::StatusCode::kDataLoss;
  if (status.IsInvalidArgument()) return absl::StatusCode::kInvalidArgument;
  if (status.IsNotSupported()) return absl::StatusCode::kUnimplemented;
  if (status.IsBusy() || status.IsTimedOut() || status.IsTryAgain() ||
      status.IsIncomplete() || status.IsShutdownInProgress()) {
    return absl::StatusCode::kUnavailable;
  }
  // Both are subcodes (of IOError and Aborted), so they go first.
  if (status.IsNoSpace() || status.IsMemoryLimit()) {
    return absl::StatusCode::kResourceExhausted;
  }
  if (status.IsAborted()) return absl::StatusCode::kAborted;
  if (IsLockHeld(status, message)) return absl::StatusCode::kUnavailable;
  return absl::StatusCode::kInternal;
}

}  // namespace

absl::Status FromRocksDb(const rocksdb::Status& status,
                         std::string_view context) {
  if (status.ok()) return absl::OkStatus();
  const std::string message = status.ToString();
  return absl::Status(MapCode(status, message),
                      absl::StrCat(AbslView(context), ": ", message));
}

}  // namespace twice::storage
