// Keeps one corrupt value from turning the whole store read-only.
//
// With blob garbage collection on, a compaction reads the state values it
// relocates; one damaged byte in a blob file then fails the compaction with
// "Corruption: Blob CRC mismatch", and RocksDB (paranoid_checks) makes that a
// background error that refuses every later write until the database is
// reopened (seen in the corrupt-blob fault campaign, docs/RELIABILITY.md).
// A failed compaction loses nothing (its inputs stay), and the damaged state
// is a cache entry that the read path verifies, deletes and has recomputed,
// after which the compaction succeeds. So compaction corruptions are
// counted, logged by RocksDB, and not raised; every other background error
// (a failed WAL sync, a full disk, a corrupt flush) is left to RocksDB.
#ifndef TWICE_STORAGE_BACKGROUND_ERROR_LISTENER_H_
#define TWICE_STORAGE_BACKGROUND_ERROR_LISTENER_H_

#include <atomic>
#include <cstdint>

#include "rocksdb/listener.h"

namespace twice::storage {

class BackgroundErrorListener : public rocksdb::EventListener {
 public:
  // `corruptions` (owned by the store) counts each suppressed corruption.
  explicit BackgroundErrorListener(std::atomic<int64_t>* corruptions)
      : corruptions_(corruptions) {}

  void OnBackgroundError(rocksdb::BackgroundErrorReason reason,
                         rocksdb::Status* bg_error) override;

 private:
  std::atomic<int64_t>* corruptions_;
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_BACKGROUND_ERROR_LISTENER_H_
