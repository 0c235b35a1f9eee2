// RecordConfirmation: reads a document's current record on its own thread
// while an ask runs from a cached guess of it (record_cache.h). The ask's
// sink calls Confirmed() before its first write, which waits for the read:
// the round trip overlaps the decode call instead of preceding it, and a
// guess that turns out stale (another orchestrator appended, pinned or
// deleted) sends nothing; the ask then runs again from the record read.
// With the store's watch (storage/record_watch.h), the read is begun under
// a fresh mark, which the cache keeps with what was read.
#ifndef TWICE_SERVICES_ORCHESTRATOR_RECORD_CONFIRMATION_H_
#define TWICE_SERVICES_ORCHESTRATOR_RECORD_CONFIRMATION_H_

#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "storage/document_catalog.h"
#include "storage/document_record.h"
#include "storage/record_watch.h"

namespace twice::services {

class RecordConfirmation {
 public:
  // Starts reading the record of `guess`'s document from `catalog`, which
  // must outlive this object (as must `watch`, when not null: the read
  // then begins with a mark of it).
  RecordConfirmation(storage::DocumentCatalog& catalog,
                     storage::DocumentRecord guess,
                     storage::RecordWatch* watch = nullptr);
  // Waits for the read.
  ~RecordConfirmation();
  RecordConfirmation(const RecordConfirmation&) = delete;
  RecordConfirmation& operator=(const RecordConfirmation&) = delete;

  // Waits for the read; true when it found the guessed record unchanged.
  // Safe to call from several threads.
  bool Confirmed();
  // Waits for the read and returns what it found (the document's error, as
  // FindDocumentOf words it, when it failed).
  absl::StatusOr<storage::DocumentRecord> Current();
  // Waits for the read; the mark taken before it, when there was a watch
  // and it could be begun.
  std::optional<storage::RecordWatch::Mark> WatchMark();

 private:
  void Read(storage::DocumentCatalog& catalog, storage::RecordWatch* watch);
  const absl::StatusOr<storage::DocumentRecord>& AwaitReadLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const storage::DocumentRecord guess_;
  absl::Mutex mu_;
  std::optional<absl::StatusOr<storage::DocumentRecord>> current_
      ABSL_GUARDED_BY(mu_);
  std::optional<storage::RecordWatch::Mark> mark_ ABSL_GUARDED_BY(mu_);
  std::thread reader_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_RECORD_CONFIRMATION_H_
