// RecordCache: the records of recently asked documents, kept by an
// orchestrator whose store is reached over the network (a store role or
// RADOS), where reading a record is a round trip that would otherwise sit
// in front of every question's first token. A cached record is only ever a
// guess: an ask starts from it while the current record is read
// (record_confirmation.h), and nothing reaches the caller until that read
// confirms it, so a record changed or deleted by another orchestrator is
// never answered from.
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

namespace twice::services {

class RecordCache {
 public:
  // Holds records up to about `capacity_bytes` in all (the least recently
  // used go first); a record larger than that is not kept.
  explicit RecordCache(int64_t capacity_bytes)
      : capacity_bytes_(capacity_bytes) {}

  std::optional<storage::DocumentRecord> Find(
      const storage::DocumentRef& document);
  // Keeps `record` as the latest known record of its document.
  void Put(const storage::DocumentRecord& record);
  void Forget(const storage::DocumentRef& document);

  int64_t bytes() const;

 private:
  struct Entry {
    storage::DocumentRecord record;
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
