#include "services/orchestrator/record_confirmation.h"

#include <utility>

#include "services/orchestrator/document_ids.h"
#include "services/orchestrator/record_cache.h"

namespace twice::services {

RecordConfirmation::RecordConfirmation(storage::DocumentCatalog& catalog,
                                       storage::DocumentRecord guess,
                                       storage::RecordWatch* watch)
    : guess_(std::move(guess)) {
  reader_ = std::thread([this, &catalog, watch] { Read(catalog, watch); });
}

RecordConfirmation::~RecordConfirmation() { reader_.join(); }

void RecordConfirmation::Read(storage::DocumentCatalog& catalog,
                              storage::RecordWatch* watch) {
  const storage::DocumentRef ref = storage::RefOf(guess_);
  std::optional<storage::RecordWatch::Mark> mark = BeginWatch(watch, ref);
  absl::StatusOr<storage::DocumentRecord> read = FindDocumentOf(catalog, ref);
  absl::MutexLock lock(&mu_);
  mark_ = std::move(mark);
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

std::optional<storage::RecordWatch::Mark> RecordConfirmation::WatchMark() {
  absl::MutexLock lock(&mu_);
  AwaitReadLocked();
  return mark_;
}

}  // namespace twice::services
