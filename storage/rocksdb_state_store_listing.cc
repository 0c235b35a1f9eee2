// RocksDbStateStore::ListStates: the states in key order, read from the
// state index (size, form, tenant of every durable key), never the blobs.
#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "rocksdb/slice.h"
#include "storage/absl_view.h"
#include "storage/rocksdb_state_store.h"
#include "storage/rocksdb_status.h"
#include "storage/state_store_checks.h"
#include "storage/state_value.h"

namespace twice::storage {
absl::StatusOr<StatePage> RocksDbStateStore::ListStates(
    int page_size, std::string_view page_token) {
  absl::StatusOr<int> size = StatePageSize(page_size);
  if (!size.ok()) return size.status();
  page_size = *size;
  // The token is the hex key of the last state listed; the next page starts
  // strictly after it, which holds when that state was deleted meanwhile.
  std::string after;
  if (!page_token.empty()) {
    absl::StatusOr<StateKey> last = StateKey::FromHex(page_token);
    if (!last.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("page_token is not one a ListStates page returned: ",
                       last.status().message()));
    }
    after = last->Bytes();
  }
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), state_index_));
  if (after.empty()) {
    it->SeekToFirst();
  } else {
    it->Seek(ToSlice(after));
    if (it->Valid() && it->key() == ToSlice(after)) it->Next();
  }
  StatePage page;
  for (; it->Valid(); it->Next()) {
    absl::StatusOr<StateKey> key =
        StateKey::FromBytes({it->key().data(), it->key().size()});
    absl::StatusOr<StateIndexEntry> entry =
        DecodeStateIndex({it->value().data(), it->value().size()});
    // Open removes undecodable index entries; one damaged since is left to
    // Verify, which reports and repairs it.
    if (!key.ok() || !entry.ok() || entry->form == StateForm::kBlock) continue;
    if (static_cast<int>(page.states.size()) == page_size) {
      page.next_page_token = page.states.back().key.Hex();
      break;
    }
    page.states.push_back({.key = *key,
                           .stored_bytes = entry->stored_bytes,
                           .chunked = entry->form == StateForm::kManifest,
                           .tenant = entry->tenant,
                           .written_unix_ms = entry->written_unix_ms});
  }
  if (absl::Status s = FromRocksDb(it->status(), "scan the state index");
      !s.ok()) {
    return s;
  }
  return page;
}

}  // namespace twice::storage
