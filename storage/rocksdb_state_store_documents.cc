// Document records and token blobs of RocksDbStateStore.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rocksdb/slice.h"
#include "rocksdb/write_batch.h"
#include "storage/absl_view.h"
#include "storage/document_catalog_checks.h"
#include "storage/record_codec.h"
#include "storage/record_validation.h"
#include "storage/rocksdb_state_store.h"
#include "storage/rocksdb_status.h"
#include "storage/state_ref.h"
#include "storage/token_codec.h"

namespace twice::storage {

std::string RocksDbStateStore::DocumentKey(std::string_view tenant,
                                           std::string_view document_id) {
  // Tenants contain no NUL (ValidateTenant), so the key splits one way only
  // and "tenant\0" prefixes exactly that tenant's documents.
  return absl::StrCat(AbslView(tenant), absl::string_view("\0", 1),
                      AbslView(document_id));
}

absl::Status RocksDbStateStore::CountCatalogLoss(absl::Status status) {
  if (absl::IsDataLoss(status)) catalog_corruptions_ += 1;
  return status;
}

absl::StatusOr<DocumentRecord> RocksDbStateStore::ReadRecord(
    std::string_view tenant, std::string_view document_id) {
  rocksdb::PinnableSlice value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), documents_,
               ToSlice(DocumentKey(tenant, document_id)), &value);
  if (s.IsNotFound()) {
    return absl::NotFoundError(
        absl::StrCat(DocumentName(tenant, document_id), " not found"));
  }
  // A damaged file block is RocksDB's Corruption, DATA_LOSS like a bad
  // envelope; either way the message names the document.
  if (!s.ok()) {
    return CountCatalogLoss(FromRocksDb(
        s, absl::StrCat("read ", DocumentName(tenant, document_id))));
  }
  absl::StatusOr<DocumentRecord> record =
      DecodeRecordFor({value.data(), value.size()}, tenant, document_id);
  if (!record.ok()) {
    return CountCatalogLoss(
        Annotate(record.status(),
                 absl::StrCat(DocumentName(tenant, document_id), " record")));
  }
  return record;
}

RocksDbStateStore::KeySet RocksDbStateStore::NamedStates(
    const DocumentRecord& record) {
  KeySet keys;
  for (const SegmentBoundary& segment : record.segments) {
    keys.insert(segment.state_key);
  }
  for (const auto& [mode, state_key] : record.mode_states) {
    keys.insert(state_key);
  }
  return keys;
}

absl::StatusOr<std::vector<std::pair<StateKey, bool>>>
RocksDbStateStore::ScanRefsOf(std::string_view document_key) {
  // Refs are keyed by state first, so finding a document's refs without its
  // record reads them all. Only a record that no longer decodes needs this.
  std::vector<std::pair<StateKey, bool>> found;
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), refs_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    absl::StatusOr<RefKeyParts> parts =
        ParseRefKey({it->key().data(), it->key().size()});
    if (!parts.ok() || parts->document_key != document_key) continue;
    absl::StatusOr<bool> pinned =
        DecodeRef({it->value().data(), it->value().size()});
    // An unreadable flag counts as pinned, the side that loses nothing.
    found.emplace_back(parts->state, pinned.ok() ? *pinned : true);
  }
  if (absl::Status s = FromRocksDb(it->status(), "scan refs"); !s.ok()) {
    return s;
  }
  return found;
}

absl::Status RocksDbStateStore::WriteRecordLocked(
    const DocumentRecord& record, const absl::Span<const int32_t>* tokens) {
  const std::string key = DocumentKey(record.tenant, record.document_id);
  const std::string context =
      absl::StrCat("write ", DocumentName(record.tenant, record.document_id));
  std::vector<std::pair<StateKey, bool>> old_refs;
  bool existed = true;
  absl::StatusOr<DocumentRecord> existing =
      ReadRecord(record.tenant, record.document_id);
  // The conditional write (document_catalog.h): checked under document_mu_,
  // which every record write holds, so check and commit are one step.
  const int64_t stored_revision = existing.ok() ? existing->revision
                                  : absl::IsNotFound(existing.status())
                                      ? 0
                                      : record.revision;
  if (record.revision != stored_revision) {
    return StaleWriteError(record, stored_revision);
  }
  DocumentRecord committed = record;
  committed.revision = stored_revision + 1;
  if (existing.ok()) {
    for (const StateKey& state : NamedStates(*existing)) {
      old_refs.emplace_back(state, existing->pinned);
    }
  } else if (absl::IsDataLoss(existing.status())) {
    absl::StatusOr<std::vector<std::pair<StateKey, bool>>> scanned =
        ScanRefsOf(key);
    if (!scanned.ok()) return scanned.status();
    old_refs = *std::move(scanned);
  } else if (absl::IsNotFound(existing.status())) {
    existed = false;
  } else {
    return existing.status();
  }
  const KeySet named = NamedStates(record);
  KeySet touched = named;
  for (const auto& [state, pinned] : old_refs) touched.insert(state);

  // Pins change only under the stripes of their states, so an eviction
  // that checks a pin under the same stripe cannot miss a new one.
  StripeLocks locks = LockStripes(touched);
  rocksdb::WriteBatch batch;
  rocksdb::Status s =
      batch.Put(documents_, ToSlice(key), ToSlice(EncodeRecord(committed)));
  if (s.ok() && tokens != nullptr) {
    s = batch.Put(tokens_, ToSlice(key), ToSlice(EncodeTokens(*tokens)));
  }
  for (const auto& [state, pinned] : old_refs) {
    if (s.ok() && !named.contains(state)) {
      s = batch.Delete(refs_, ToSlice(RefKey(state, key)));
    }
  }
  const std::string ref_value = EncodeRef(record.pinned);
  for (const StateKey& state : named) {
    if (s.ok()) s = batch.Put(refs_, ToSlice(RefKey(state, key)), ref_value);
  }
  if (s.ok()) s = db_->Write(write_options_, &batch);
  if (!s.ok()) return FromRocksDb(s, context);

  for (const auto& [state, pinned] : old_refs) {
    index_.AddRefs(state, -1, pinned ? -1 : 0);
  }
  for (const StateKey& state : named) {
    index_.AddRefs(state, 1, record.pinned ? 1 : 0);
  }
  if (!existed) document_count_ += 1;
  return absl::OkStatus();
}

absl::Status RocksDbStateStore::RebuildRefsLocked(const DocumentRecord& record,
                                                  bool scan_existing) {
  const std::string key = DocumentKey(record.tenant, record.document_id);
  std::vector<std::pair<StateKey, bool>> existing;
  if (scan_existing) {
    absl::StatusOr<std::vector<std::pair<StateKey, bool>>> scanned =
        ScanRefsOf(key);
    if (!scanned.ok()) return scanned.status();
    existing = *std::move(scanned);
  }
  rocksdb::WriteBatch batch;
  rocksdb::Status s;
  for (const auto& [state, pinned] : existing) {
    if (s.ok()) s = batch.Delete(refs_, ToSlice(RefKey(state, key)));
  }
  const KeySet named = NamedStates(record);
  const std::string ref_value = EncodeRef(record.pinned);
  for (const StateKey& state : named) {
    if (s.ok()) s = batch.Put(refs_, ToSlice(RefKey(state, key)), ref_value);
  }
  if (s.ok()) s = db_->Write(write_options_, &batch);
  if (!s.ok()) return FromRocksDb(s, "rebuild refs");
  for (const auto& [state, pinned] : existing) {
    index_.AddRefs(state, -1, pinned ? -1 : 0);
  }
  for (const StateKey& state : named) {
    index_.AddRefs(state, 1, record.pinned ? 1 : 0);
  }
  return absl::OkStatus();
}

absl::Status RocksDbStateStore::PutDocument(const DocumentRecord& record,
                                            absl::Span<const int32_t> tokens) {
  if (absl::Status s = ValidateDocumentRecord(record); !s.ok()) return s;
  if (static_cast<int64_t>(tokens.size()) != record.token_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("record says ", record.token_count, " tokens, ",
                     tokens.size(), " given"));
  }
  if (absl::Status s =
          disk_.CheckPut(absl::StrCat("write document ", record.document_id),
                         static_cast<int64_t>(tokens.size() * sizeof(int32_t)));
      !s.ok()) {
    return s;
  }
  std::lock_guard<std::mutex> lock(document_mu_);
  return WriteRecordLocked(record, &tokens);
}

absl::Status RocksDbStateStore::UpdateDocument(const DocumentRecord& record) {
  if (absl::Status s = ValidateDocumentRecord(record); !s.ok()) return s;
  if (absl::Status s = disk_.CheckPut(
          absl::StrCat("update document ", record.document_id), 0);
      !s.ok()) {
    return s;
  }

  std::lock_guard<std::mutex> lock(document_mu_);
  // Record and tokens are written and deleted together, so a stored record
  // means stored tokens. Its token_count is compared instead of reading the
  // token blob, which would make an access-time update cost the document's
  // size; the blob is read only when the old record is unreadable.
  int64_t stored_token_count = 0;
  absl::StatusOr<DocumentRecord> existing =
      ReadRecord(record.tenant, record.document_id);
  if (existing.ok()) {
    stored_token_count = existing->token_count;
  } else if (absl::IsDataLoss(existing.status())) {
    absl::StatusOr<std::vector<int32_t>> tokens = GetTokens(RefOf(record));
    if (!tokens.ok()) return tokens.status();
    stored_token_count = static_cast<int64_t>(tokens->size());
  } else {
    return existing.status();
  }
  if (absl::Status same = CheckUnchangedTokenCount(record, stored_token_count);
      !same.ok()) {
    return same;
  }
  return WriteRecordLocked(record, nullptr);
}

absl::StatusOr<DocumentRecord> RocksDbStateStore::GetDocument(
    const DocumentRef& document) {
  const std::string_view tenant = document.tenant;
  const std::string_view document_id = document.document_id;
  if (absl::Status s = CheckDocumentRef(tenant, document_id); !s.ok()) {
    return s;
  }
  return ReadRecord(tenant, document_id);
}

absl::StatusOr<std::vector<int32_t>> RocksDbStateStore::GetTokens(
    const DocumentRef& document) {
  const std::string_view tenant = document.tenant;
  const std::string_view document_id = document.document_id;
  if (absl::Status s = CheckDocumentRef(tenant, document_id); !s.ok()) {
    return s;
  }
  const std::string name = DocumentName(tenant, document_id);
  rocksdb::PinnableSlice value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), tokens_,
               ToSlice(DocumentKey(tenant, document_id)), &value);
  if (s.IsNotFound()) {
    return absl::NotFoundError(absl::StrCat("tokens of ", name, " not found"));
  }
  if (!s.ok()) {
    return CountCatalogLoss(
        FromRocksDb(s, absl::StrCat("read tokens of ", name)));
  }
  absl::StatusOr<std::vector<int32_t>> tokens =
      DecodeTokens({value.data(), value.size()});
  if (!tokens.ok()) {
    return CountCatalogLoss(
        Annotate(tokens.status(), absl::StrCat("tokens of ", name)));
  }
  return tokens;
}

absl::StatusOr<DocumentPage> RocksDbStateStore::ListDocuments(
    std::string_view tenant, int page_size, std::string_view page_token) {
  if (absl::Status s = ValidateTenant(tenant); !s.ok()) return s;
  absl::StatusOr<int> size = DocumentPageSize(page_size);
  if (!size.ok()) return size.status();
  page_size = *size;

  const std::string prefix = DocumentKey(tenant, "");
  // "tenant\1" is the first key past every "tenant\0..." key.
  const std::string upper =
      absl::StrCat(AbslView(tenant), absl::string_view("\1", 1));
  const rocksdb::Slice upper_slice = ToSlice(upper);
  rocksdb::ReadOptions read_options;
  read_options.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(read_options, documents_));

  // The token is the last id returned; resume strictly after it, which
  // also works when that document has been deleted in between.
  const std::string start = DocumentKey(tenant, page_token);
  it->Seek(ToSlice(start));
  if (!page_token.empty() && it->Valid() && it->key() == ToSlice(start)) {
    it->Next();
  }

  DocumentPage page;
  for (; it->Valid(); it->Next()) {
    if (static_cast<int>(page.records.size()) == page_size) {
      page.next_page_token = page.records.back().document_id;
      break;
    }
    const std::string_view key(it->key().data(), it->key().size());
    const std::string_view document_id = key.substr(prefix.size());
    absl::StatusOr<DocumentRecord> record = DecodeRecordFor(
        {it->value().data(), it->value().size()}, tenant, document_id);
    if (!record.ok()) {
      return CountCatalogLoss(
          Annotate(record.status(),
                   absl::StrCat(DocumentName(tenant, document_id), " record")));
    }
    page.records.push_back(*std::move(record));
  }
  if (!it->status().ok()) {
    // The iterator stops at a damaged block without knowing its keys: say
    // where the listing got to.
    std::string after = "the start";
    if (!page.records.empty()) {
      after = DocumentName(tenant, page.records.back().document_id);
    } else if (!page_token.empty()) {
      after = DocumentName(tenant, page_token);
    }
    return CountCatalogLoss(FromRocksDb(
        it->status(), absl::StrCat("list documents of tenant ",
                                   AbslView(tenant), " after ", after)));
  }
  return page;
}

absl::StatusOr<int64_t> RocksDbStateStore::DeleteDocument(
    const DocumentRef& document) {
  const std::string_view tenant = document.tenant;
  const std::string_view document_id = document.document_id;
  if (absl::Status s = CheckDocumentRef(tenant, document_id); !s.ok()) {
    return s;
  }
  if (absl::Status s = disk_.CheckDelete(
          absl::StrCat("delete document ", AbslView(document_id)));
      !s.ok()) {
    return s;
  }
  const std::string key = DocumentKey(tenant, document_id);
  const std::string name = DocumentName(tenant, document_id);

  std::lock_guard<std::mutex> doc_lock(document_mu_);
  std::vector<std::pair<StateKey, bool>> refs;
  absl::StatusOr<DocumentRecord> record = ReadRecord(tenant, document_id);
  if (record.ok()) {
    for (const StateKey& state : NamedStates(*record)) {
      refs.emplace_back(state, record->pinned);
    }
  } else if (absl::IsDataLoss(record.status())) {
    // A corrupt record can still be deleted; its refs say what it named.
    absl::StatusOr<std::vector<std::pair<StateKey, bool>>> scanned =
        ScanRefsOf(key);
    if (!scanned.ok()) return scanned.status();
    refs = *std::move(scanned);
  } else {
    return record.status();
  }

  // Ref counts change only under document_mu_, held here, so "named by no
  // other record" cannot change before the commit.
  KeySet named;
  KeySet doomed;
  for (const auto& [state, pinned] : refs) {
    named.insert(state);
    if (index_.RecordRefs(state) <= 1) doomed.insert(state);
  }
  StripeLocks locks;
  KeySet orphans;
  while (true) {
    KeySet all = named;
    for (const StateKey& block : OrphansIfRemoved(doomed)) all.insert(block);
    locks = LockStripes(all);
    orphans = OrphansIfRemoved(doomed);
    bool covered = true;
    for (const StateKey& block : orphans)
      covered = covered && all.contains(block);
    if (covered) break;
    locks.clear();
  }

  rocksdb::WriteBatch batch;
  rocksdb::Status s = batch.Delete(documents_, ToSlice(key));
  if (s.ok()) s = batch.Delete(tokens_, ToSlice(key));
  for (const StateKey& state : named) {
    if (s.ok()) s = batch.Delete(refs_, ToSlice(RefKey(state, key)));
  }
  const Deleted deleted = AppendDeletes(doomed, orphans, batch);
  if (s.ok()) s = db_->Write(write_options_, &batch);
  if (!s.ok()) return FromRocksDb(s, absl::StrCat("delete ", name));

  for (const auto& [state, pinned] : refs) {
    index_.AddRefs(state, -1, pinned ? -1 : 0);
  }
  ForgetDeleted(doomed, orphans);
  document_count_ -= 1;
  return deleted.states;
}

}  // namespace twice::storage
