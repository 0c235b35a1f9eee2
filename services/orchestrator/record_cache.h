// RecordCache: the records of recently asked documents, kept by an
// orchestrator whose store is reached over the network (a store role or
// RADOS), where reading a record is a round trip that would otherwise sit
// in front of every question's first token. A cached record is used in one
// of two ways, and neither answers from a record that another orchestrator
// changed or deleted before the question came:
// - with the mark of the store's watch taken before it was read
//   (storage/record_watch.h), while the watch says no commit has touched
//   it since: as the current record, with no read;
// - otherwise as a guess: an ask starts from it while the current record
//   is read (record_confirmation.h), and nothing reaches the caller until
//   that read confirms it.
#ifndef TWICE_SERVICES_ORCHESTRATOR_RECORD_CACHE_H_
#define TWICE_SERVICES_ORCHESTRATOR_RECORD_CACHE_H_

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/document_catalog.h"
#include "storage/document_record.h"
#include "storage/record_watch.h"

namespace twice::services {

// A cached record, with the watch's mark taken before it was read (none
// when the store has no watch or it could not be begun).
struct KeptRecord {
  storage::DocumentRecord record;
  std::optional<storage::RecordWatch::Mark> mark;
};

class RecordCache {
 public:
  // Holds records up to about `capacity_bytes` in all (the least recently
  // used go first); a record larger than that is not kept.
  explicit RecordCache(int64_t capacity_bytes)
      : capacity_bytes_(capacity_bytes) {}

  std::optional<KeptRecord> Find(const storage::DocumentRef& document);
  // Keeps `record` as the latest known record of its document, with the
  // mark taken before the read that found it.
  void Put(const storage::DocumentRecord& record,
           std::optional<storage::RecordWatch::Mark> mark = std::nullopt);
  void Forget(const storage::DocumentRef& document);

  int64_t bytes() const;

 private:
  struct Entry {
    KeptRecord kept;
    int64_t bytes = 0;
    std::list<std::string>::iterator recency;
  };

  void EraseLocked(std::unordered_map<std::string, Entry>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t capacity_bytes_;
  mutable absl::Mutex mu_;
  std::unordered_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> recency_ ABSL_GUARDED_BY(mu_);  // most recent first
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// A mark of `watch` for `document` (storage/record_watch.h), or none when
// there is no watch or it could not be begun (then what is read next is
// kept only as a guess).
std::optional<storage::RecordWatch::Mark> BeginWatch(
    storage::RecordWatch* watch, const storage::DocumentRef& document);

// The memory a record takes, for the cache's budget.
int64_t RecordBytes(const storage::DocumentRecord& record);

// Whether two reads of a document's record describe the same content: the
// same revision of the same incarnation (a document deleted and ingested
// again restarts its revisions, its creation time differs) with the same
// states. The access time is left out: it changes without a write.
bool SameRecord(const storage::DocumentRecord& a,
                const storage::DocumentRecord& b);

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_RECORD_CACHE_H_
