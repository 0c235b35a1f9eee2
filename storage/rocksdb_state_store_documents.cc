// Document records and token blobs of RocksDbStateStore.
#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rocksdb/slice.h"
#include "rocksdb/write_batch.h"
#include "storage/absl_view.h"
#include "storage/record_codec.h"
#include "storage/record_validation.h"
#include "storage/rocksdb_state_store.h"
#include "storage/rocksdb_status.h"
#include "storage/token_codec.h"

namespace twice::storage {
namespace {

constexpr int kDefaultPageSize = 100;

rocksdb::Slice ToSlice(std::string_view s) { return {s.data(), s.size()}; }

std::string DocumentName(std::string_view tenant,
                         std::string_view document_id) {
  return absl::StrCat("document ", AbslView(tenant), "/",
                      AbslView(document_id));
}

absl::Status CheckTenantAndId(std::string_view tenant,
                              std::string_view document_id) {
  if (absl::Status s = ValidateTenant(tenant); !s.ok()) return s;
  return ValidateDocumentId(document_id);
}

// A record that decodes but breaks the write rules, or sits under another
// document's key, was not written by this code for this key.
absl::StatusOr<DocumentRecord> DecodeRecordFor(std::string_view stored,
                                               std::string_view tenant,
                                               std::string_view document_id) {
  absl::StatusOr<DocumentRecord> record = DecodeRecord(stored);
  if (!record.ok()) return record.status();
  if (absl::Status s = ValidateDocumentRecord(*record); !s.ok()) {
    return absl::DataLossError(s.message());
  }
  if (record->tenant != tenant || record->document_id != document_id) {
    return absl::DataLossError("record is stored under another document's key");
  }
  return record;
}

absl::Status Annotate(const absl::Status& status, std::string_view what) {
  return absl::Status(status.code(),
                      absl::StrCat(AbslView(what), ": ", status.message()));
}

}  // namespace

std::string RocksDbStateStore::DocumentKey(std::string_view tenant,
                                           std::string_view document_id) {
  // Tenants contain no NUL (ValidateTenant), so the key splits one way only
  // and "tenant\0" prefixes exactly that tenant's documents.
  return absl::StrCat(AbslView(tenant), absl::string_view("\0", 1),
                      AbslView(document_id));
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
  if (!s.ok()) {
    return FromRocksDb(
        s, absl::StrCat("read ", DocumentName(tenant, document_id)));
  }
  absl::StatusOr<DocumentRecord> record =
      DecodeRecordFor({value.data(), value.size()}, tenant, document_id);
  if (!record.ok()) {
    return Annotate(record.status(),
                    absl::StrCat(DocumentName(tenant, document_id), " record"));
  }
  return record;
}

absl::Status RocksDbStateStore::PutDocument(const DocumentRecord& record,
                                            absl::Span<const int32_t> tokens) {
  if (absl::Status s = ValidateDocumentRecord(record); !s.ok()) return s;
  if (static_cast<int64_t>(tokens.size()) != record.token_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("record says ", record.token_count, " tokens, ",
                     tokens.size(), " given"));
  }
  const std::string key = DocumentKey(record.tenant, record.document_id);
  const std::string record_value = EncodeRecord(record);
  const std::string token_value = EncodeTokens(tokens);
  const std::string context =
      absl::StrCat("write ", DocumentName(record.tenant, record.document_id));

  std::lock_guard<std::mutex> lock(document_mu_);
  rocksdb::PinnableSlice existing;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), documents_, ToSlice(key), &existing);
  const bool existed = s.ok();
  if (!s.ok() && !s.IsNotFound()) return FromRocksDb(s, context);

  rocksdb::WriteBatch batch;
  s = batch.Put(documents_, ToSlice(key), ToSlice(record_value));
  if (s.ok()) s = batch.Put(tokens_, ToSlice(key), ToSlice(token_value));
  if (s.ok()) s = db_->Write(write_options_, &batch);
  if (!s.ok()) return FromRocksDb(s, context);
  if (!existed) document_count_ += 1;
  return absl::OkStatus();
}

absl::Status RocksDbStateStore::UpdateDocument(const DocumentRecord& record) {
  if (absl::Status s = ValidateDocumentRecord(record); !s.ok()) return s;
  const std::string name = DocumentName(record.tenant, record.document_id);

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
    absl::StatusOr<std::vector<int32_t>> tokens =
        GetTokens(record.tenant, record.document_id);
    if (!tokens.ok()) return tokens.status();
    stored_token_count = static_cast<int64_t>(tokens->size());
  } else {
    return existing.status();
  }
  if (record.token_count != stored_token_count) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " has ", stored_token_count,
                     " tokens; UpdateDocument cannot change token_count to ",
                     record.token_count, " (use PutDocument)"));
  }
  return FromRocksDb(
      db_->Put(write_options_, documents_,
               ToSlice(DocumentKey(record.tenant, record.document_id)),
               ToSlice(EncodeRecord(record))),
      absl::StrCat("write ", name));
}

absl::StatusOr<DocumentRecord> RocksDbStateStore::GetDocument(
    std::string_view tenant, std::string_view document_id) {
  if (absl::Status s = CheckTenantAndId(tenant, document_id); !s.ok()) {
    return s;
  }
  return ReadRecord(tenant, document_id);
}

absl::StatusOr<std::vector<int32_t>> RocksDbStateStore::GetTokens(
    std::string_view tenant, std::string_view document_id) {
  if (absl::Status s = CheckTenantAndId(tenant, document_id); !s.ok()) {
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
  if (!s.ok()) return FromRocksDb(s, absl::StrCat("read tokens of ", name));
  absl::StatusOr<std::vector<int32_t>> tokens =
      DecodeTokens({value.data(), value.size()});
  if (!tokens.ok()) {
    return Annotate(tokens.status(), absl::StrCat("tokens of ", name));
  }
  return tokens;
}

absl::StatusOr<DocumentPage> RocksDbStateStore::ListDocuments(
    std::string_view tenant, int page_size, std::string_view page_token) {
  if (absl::Status s = ValidateTenant(tenant); !s.ok()) return s;
  if (page_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size must be non-negative, got ", page_size));
  }
  if (page_size == 0) page_size = kDefaultPageSize;

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
      return Annotate(
          record.status(),
          absl::StrCat(DocumentName(tenant, document_id), " record"));
    }
    page.records.push_back(*std::move(record));
  }
  if (absl::Status s = FromRocksDb(it->status(), "list documents"); !s.ok()) {
    return s;
  }
  return page;
}

absl::StatusOr<int64_t> RocksDbStateStore::DeleteDocument(
    std::string_view tenant, std::string_view document_id) {
  if (absl::Status s = CheckTenantAndId(tenant, document_id); !s.ok()) {
    return s;
  }
  const std::string key = DocumentKey(tenant, document_id);
  const std::string name = DocumentName(tenant, document_id);

  std::lock_guard<std::mutex> doc_lock(document_mu_);
  std::set<std::string> doomed;  // state keys, raw bytes
  absl::StatusOr<DocumentRecord> record = ReadRecord(tenant, document_id);
  if (record.ok()) {
    for (const SegmentBoundary& segment : record->segments) {
      doomed.emplace(segment.state_key.Bytes());
    }
    for (const auto& [mode, state_key] : record->mode_states) {
      doomed.emplace(state_key.Bytes());
    }
  } else if (!absl::IsDataLoss(record.status())) {
    return record.status();
  }
  // A corrupt record can still be deleted; the states it named are unknown
  // and stay until eviction removes them.

  // Keep every state another record names. This reads every record of every
  // tenant (keys do not promise tenant scoping to the store): O(documents)
  // per delete, fine for thousands of documents, seconds at millions. The
  // fix then is a reference family (state key + document key -> empty)
  // maintained in PutDocument's batch, making this O(states named). A record
  // that does not decode names nothing we can see; at worst a state it shares
  // is deleted and later recomputed, as states are a cache.
  if (!doomed.empty()) {
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), documents_));
    for (it->SeekToFirst(); it->Valid() && !doomed.empty(); it->Next()) {
      if (it->key() == ToSlice(key)) continue;
      absl::StatusOr<DocumentRecord> other =
          DecodeRecord({it->value().data(), it->value().size()});
      if (!other.ok()) continue;
      for (const SegmentBoundary& segment : other->segments) {
        doomed.erase(std::string(segment.state_key.Bytes()));
      }
      for (const auto& [mode, state_key] : other->mode_states) {
        doomed.erase(std::string(state_key.Bytes()));
      }
    }
    if (absl::Status s = FromRocksDb(it->status(), "scan documents"); !s.ok()) {
      return s;
    }
  }

  // Lock the stripes of the doomed states in ascending order (every path
  // that takes several takes them this way) so the counters stay exact.
  std::set<size_t> stripes;
  std::vector<StateKey> state_keys;
  for (const std::string& bytes : doomed) {
    absl::StatusOr<StateKey> state_key = StateKey::FromBytes(bytes);
    if (!state_key.ok()) return state_key.status();
    stripes.insert(state_key->digest[0] % kStateLockStripes);
    state_keys.push_back(*state_key);
  }
  std::vector<std::unique_lock<std::mutex>> state_guards;
  for (size_t stripe : stripes) state_guards.emplace_back(state_locks_[stripe]);

  rocksdb::WriteBatch batch;
  rocksdb::Status s = batch.Delete(documents_, ToSlice(key));
  if (s.ok()) s = batch.Delete(tokens_, ToSlice(key));
  int64_t deleted_states = 0;
  int64_t deleted_bytes = 0;
  for (const StateKey& state_key : state_keys) {
    absl::StatusOr<std::optional<StateIndexEntry>> index = ReadIndex(state_key);
    if (!index.ok() && !absl::IsDataLoss(index.status())) {
      return index.status();
    }
    if (index.ok() && !index->has_value()) continue;  // not stored
    if (s.ok()) s = batch.Delete(states_, ToSlice(state_key.Bytes()));
    if (s.ok()) s = batch.Delete(state_index_, ToSlice(state_key.Bytes()));
    if (index.ok()) {
      deleted_states += 1;
      deleted_bytes += (*index)->stored_bytes;
    }
  }
  if (s.ok()) s = db_->Write(write_options_, &batch);
  if (!s.ok()) return FromRocksDb(s, absl::StrCat("delete ", name));

  document_count_ -= 1;
  state_count_ -= deleted_states;
  state_bytes_ -= deleted_bytes;
  return deleted_states;
}

}  // namespace twice::storage
