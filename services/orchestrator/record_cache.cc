#include "services/orchestrator/record_cache.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace twice::services {
namespace {

// Tenant and id joined by a byte neither may contain.
std::string CacheKey(const storage::DocumentRef& document) {
  return absl::StrCat(document.tenant, std::string(1, '\0'),
                      document.document_id);
}

}  // namespace

std::optional<storage::RecordWatch::Mark> BeginWatch(
    storage::RecordWatch* watch, const storage::DocumentRef& document) {
  if (watch == nullptr) return std::nullopt;
  absl::StatusOr<storage::RecordWatch::Mark> mark = watch->Begin(document);
  if (!mark.ok()) return std::nullopt;
  return *std::move(mark);
}

int64_t RecordBytes(const storage::DocumentRecord& record) {
  int64_t bytes = static_cast<int64_t>(sizeof(record));
  for (const std::string* s :
       {&record.tenant, &record.document_id, &record.model,
        &record.model_fingerprint, &record.text_sha256}) {
    bytes += static_cast<int64_t>(s->size());
  }
  bytes += static_cast<int64_t>(record.segments.size() *
                                sizeof(storage::SegmentBoundary));
  for (const auto& [mode, key] : record.mode_states) {
    bytes += static_cast<int64_t>(mode.size() + sizeof(key));
  }
  return bytes;
}

bool SameRecord(const storage::DocumentRecord& a,
                const storage::DocumentRecord& b) {
  if (a.revision != b.revision || a.created_unix_ms != b.created_unix_ms ||
      a.tenant != b.tenant || a.document_id != b.document_id ||
      a.model != b.model || a.model_fingerprint != b.model_fingerprint ||
      a.text_sha256 != b.text_sha256 || a.token_count != b.token_count ||
      a.segment_tokens != b.segment_tokens || a.pinned != b.pinned ||
      a.mode_states != b.mode_states ||
      a.segments.size() != b.segments.size()) {
    return false;
  }
  for (size_t i = 0; i < a.segments.size(); ++i) {
    if (a.segments[i].end_token != b.segments[i].end_token ||
        !(a.segments[i].state_key == b.segments[i].state_key)) {
      return false;
    }
  }
  return true;
}

std::optional<KeptRecord> RecordCache::Find(
    const storage::DocumentRef& document) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(CacheKey(document));
  if (it == entries_.end()) return std::nullopt;
  recency_.splice(recency_.begin(), recency_, it->second.recency);
  return it->second.kept;
}

void RecordCache::Put(const storage::DocumentRecord& record,
                      std::optional<storage::RecordWatch::Mark> mark) {
  const std::string key = CacheKey(storage::RefOf(record));
  const int64_t bytes =
      RecordBytes(record) +
      (mark ? static_cast<int64_t>(sizeof(*mark) + mark->watched.size()) : 0);
  absl::MutexLock lock(&mu_);
  if (auto it = entries_.find(key); it != entries_.end()) EraseLocked(it);
  if (bytes > capacity_bytes_) return;
  while (bytes_ + bytes > capacity_bytes_ && !recency_.empty()) {
    EraseLocked(entries_.find(recency_.back()));
  }
  recency_.push_front(key);
  entries_.emplace(
      key, Entry{KeptRecord{record, std::move(mark)}, bytes, recency_.begin()});
  bytes_ += bytes;
}

void RecordCache::Forget(const storage::DocumentRef& document) {
  absl::MutexLock lock(&mu_);
  if (auto it = entries_.find(CacheKey(document)); it != entries_.end()) {
    EraseLocked(it);
  }
}

int64_t RecordCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

void RecordCache::EraseLocked(
    std::unordered_map<std::string, Entry>::iterator it) {
  bytes_ -= it->second.bytes;
  recency_.erase(it->second.recency);
  entries_.erase(it);
}

}  // namespace twice::services
