#include "storage/background_error_listener.h"

#include <cstdio>
#include <string>
#include <utility>

#include "storage/rocksdb_state_store.h"

namespace twice::storage {
namespace {

// OnBackgroundError does not name the column family, so the family comes
// from the compaction's own notification. In RocksDB 7.8 (and since)
// DBImpl::BackgroundCompaction runs on one background thread, in order:
// OnCompactionBegin, the compaction, OnCompactionCompleted (cf_name and the
// compaction's status), then ErrorHandler::SetBGError(status, kCompaction),
// which calls OnBackgroundError synchronously on the same thread
// (db_impl_compaction_flush.cc, error_handler.cc). A manual CompactRange is
// run by the same function on a background thread. So what this thread saw
// completing last is the failed compaction, and its status is the very
// error being raised: both are checked before an error is suppressed.
// Anything else (CompactFiles, which notifies nothing first; a status that
// does not match) leaves the family unknown, and unknown is treated as the
// truth: raised, never suppressed.
struct FailedCompaction {
  std::string family;
  std::string error;  // rocksdb::Status::ToString()
};
thread_local FailedCompaction last_failed;

bool IsCacheFamily(const std::string& family) {
  return family == kStatesFamily;
}

}  // namespace

void BackgroundErrorListener::OnCompactionBegin(
    rocksdb::DB* /*db*/, const rocksdb::CompactionJobInfo& /*info*/) {
  last_failed = {};
}

void BackgroundErrorListener::OnCompactionCompleted(
    rocksdb::DB* /*db*/, const rocksdb::CompactionJobInfo& info) {
  if (info.status.IsCorruption()) {
    last_failed = {info.cf_name, info.status.ToString()};
  } else {
    last_failed = {};
  }
}

void BackgroundErrorListener::OnBackgroundError(
    rocksdb::BackgroundErrorReason reason, rocksdb::Status* bg_error) {
  if (bg_error == nullptr || !bg_error->IsCorruption() ||
      reason != rocksdb::BackgroundErrorReason::kCompaction) {
    return;
  }
  const FailedCompaction failed = std::exchange(last_failed, {});
  const std::string error = bg_error->ToString();
  if (IsCacheFamily(failed.family) && failed.error == error) {
    corruptions_->fetch_add(1);
    *bg_error = rocksdb::Status::OK();
    return;
  }
  catalog_corruptions_->fetch_add(1);
  // The store has no logger of its own; one line per event, on the
  // process's stderr, beside RocksDB's own "Compaction error" in its LOG.
  std::fprintf(stderr,
               "twice: storage: a compaction of column family %s met "
               "corruption; writes stop until the store is reopened: %s\n",
               failed.family.empty() ? "(unknown)" : failed.family.c_str(),
               error.c_str());
}

}  // namespace twice::storage
