#include "services/orchestrator/document_locks.h"

#include "absl/strings/str_cat.h"

namespace twice::services {

std::shared_ptr<void> DocumentLocks::Lock(
    const storage::DocumentRef& document) {
  // Document ids hold no '/', so the key splits at its last one uniquely.
  std::string key = absl::StrCat(document.tenant, "/", document.document_id);
  absl::MutexLock lock(&mu_);
  while (held_.contains(key)) released_.Wait(&mu_);
  held_.insert(key);
  return std::shared_ptr<void>(nullptr, [this, key](void*) {
    absl::MutexLock unlock(&mu_);
    held_.erase(key);
    released_.SignalAll();
  });
}

}  // namespace twice::services
