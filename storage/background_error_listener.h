// Keeps one corrupt cache value from turning the whole store read-only,
// and never hides a corrupt document record or token blob.
//
// With blob garbage collection on, a compaction reads the state values it
// relocates; one damaged byte in a blob file then fails the compaction with
// "Corruption: Blob CRC mismatch", and RocksDB (paranoid_checks) makes that a
// background error that refuses every later write until the database is
// reopened (seen in the corrupt-blob fault campaign, docs/RELIABILITY.md).
// A failed compaction loses nothing (its inputs stay), and a damaged state
// is a cache entry that the read path verifies, deletes and has recomputed,
// after which the compaction succeeds. So compaction corruptions of the
// cache family (states) are counted (`corruptions`), logged by
// RocksDB, and not raised.
//
// Every other family (documents, tokens, refs, state_index) holds the truth,
// which nothing recomputes: a compaction corruption there is counted
// (`catalog_corruptions`), written to stderr (RocksDB's LOG has it too) and
// left to RocksDB, which then refuses every write until the store is
// reopened.
// Every other background error (a failed WAL sync, a full disk, a corrupt
// flush) is left to RocksDB as well.
//
// Thread safety: RocksDB calls the listener from its background threads and
// from writers; the counters are atomics owned by the store.
#ifndef TWICE_STORAGE_BACKGROUND_ERROR_LISTENER_H_
#define TWICE_STORAGE_BACKGROUND_ERROR_LISTENER_H_

#include <atomic>
#include <cstdint>

#include "rocksdb/listener.h"

namespace twice::storage {

class BackgroundErrorListener : public rocksdb::EventListener {
 public:
  // Both counters are owned by the store and outlive the database:
  // `corruptions` counts each suppressed cache corruption,
  // `catalog_corruptions` each corruption of the truth left raised.
  BackgroundErrorListener(std::atomic<int64_t>* corruptions,
                          std::atomic<int64_t>* catalog_corruptions)
      : corruptions_(corruptions), catalog_corruptions_(catalog_corruptions) {}

  void OnCompactionBegin(rocksdb::DB* db,
                         const rocksdb::CompactionJobInfo& info) override;
  void OnCompactionCompleted(rocksdb::DB* db,
                             const rocksdb::CompactionJobInfo& info) override;
  void OnBackgroundError(rocksdb::BackgroundErrorReason reason,
                         rocksdb::Status* bg_error) override;

 private:
  std::atomic<int64_t>* corruptions_;
  std::atomic<int64_t>* catalog_corruptions_;
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_BACKGROUND_ERROR_LISTENER_H_
