#include "services/orchestrator/record_confirmation.h"

#include <utility>

#include "services/orchestrator/document_ids.h"
#include "services/orchestrator/record_cache.h"

namespace twice::services {

RecordConfirmation::RecordConfirmation(storage::DocumentCatalog& catalog,
                                       storage::DocumentRecord guess)
    : guess_(std::move(guess)) {
  reader_ = std::thread([this, &catalog] { Read(catalog); });
}

RecordConfirmation::~RecordConfirmation() { reader_.join(); }

void RecordConfirmation::Read(storage::DocumentCatalog& catalog) {
  absl::StatusOr<storage::DocumentRecord> read =
      FindDocumentOf(catalog, storage::RefOf(guess_));
  absl::MutexLock lock(&mu_);
  current_ = std::move(read);
}

const absl::StatusOr<storage::DocumentRecord>&
RecordConfirmation::AwaitReadLocked() {
  mu_.Await(absl::Condition(
      +[](std::optional<absl::StatusOr<storage::DocumentRecord>>* current) {
        return current->has_value();
      },
      &current_));
  return *current_;
}

bool RecordConfirmation::Confirmed() {
  absl::MutexLock lock(&mu_);
  const absl::StatusOr<storage::DocumentRecord>& current = AwaitReadLocked();
  return current.ok() && SameRecord(*current, guess_);
}

absl::StatusOr<storage::DocumentRecord> RecordConfirmation::Current() {
  absl::MutexLock lock(&mu_);
  return AwaitReadLocked();
}

}  // namespace twice::services
