// DocumentLocks: serializes the writes to one document within this
// process, so appends through one orchestrator queue rather than conflict.
// Across orchestrator replicas the catalog's conditional writes
// (storage/document_catalog.h) keep every write, and the one that loses
// starts again; these locks only make that rare.
#ifndef TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_LOCKS_H_
#define TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_LOCKS_H_

#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/document_catalog.h"

namespace twice::services {

class DocumentLocks {
 public:
  // Waits until no other call holds `document`, then holds it until the
  // returned guard goes.
  [[nodiscard]] std::shared_ptr<void> Lock(
      const storage::DocumentRef& document);

 private:
  absl::Mutex mu_;
  absl::CondVar released_;
  std::set<std::string> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_DOCUMENT_LOCKS_H_
