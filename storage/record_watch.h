// RecordWatch: lets a process that keeps document records in memory (the
// orchestrator's record cache) use a kept record without reading it again,
// for exactly as long as the catalog can promise that no write since has
// committed a different one. A catalog whose records live across the
// network offers one when it can keep that promise (RADOS, by watch and
// notify: rados_record_watch.h); DocumentCatalog::record_watch() is null
// otherwise, and a kept record is then only a guess to be confirmed.
//
// Use: take a Mark with Begin() before reading the record to keep, keep the
// mark with the record, and answer from the kept record while Unchanged()
// says so. A write acknowledged to its caller has ended every mark of its
// document taken before it, so an answer from a kept record is never older
// than a write that finished before the question came.
#ifndef TWICE_STORAGE_RECORD_WATCH_H_
#define TWICE_STORAGE_RECORD_WATCH_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "storage/document_catalog.h"

namespace twice::storage {

class RecordWatch {
 public:
  // Where the watch over one document's record stood when a read began.
  struct Mark {
    std::string watched;        // what is watched (e.g. an index object)
    uint64_t registration = 0;  // which registration of that watch
    uint64_t changes = 0;       // changes it had seen
    std::chrono::steady_clock::time_point begun;
  };

  virtual ~RecordWatch() = default;

  // Makes sure that from now on every commit to `document`'s record ends
  // the returned mark (the first call for a group of documents may wait
  // for a round trip to register). An error (UNAVAILABLE, NOT_FOUND for a
  // tenant with no documents yet) means nothing read now may be trusted.
  [[nodiscard]] virtual absl::StatusOr<Mark> Begin(
      const DocumentRef& document) = 0;
  // True only when no commit to the record can have been acknowledged
  // since Begin returned `mark`. Does no I/O.
  virtual bool Unchanged(const Mark& mark) = 0;
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_RECORD_WATCH_H_
