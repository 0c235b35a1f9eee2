#include "storage/rados/rados_document_catalog.h"

#include <openssl/sha.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "storage/absl_view.h"
#include "storage/document_catalog_checks.h"
#include "storage/rados/rados_layout.h"
#include "storage/rados/rados_objects.h"
#include "storage/rados/rados_state_store.h"
#include "storage/rados/rados_status.h"
#include "storage/record_codec.h"
#include "storage/record_validation.h"
#include "storage/state_value.h"
#include "storage/token_codec.h"

namespace twice::storage {
namespace {

using rados_layout::kIndexPrefix;
using rados_layout::kRecordKey;
using rados_layout::kRefKey;
using rados_layout::kRevisionKey;
using rados_layout::kStateHexDigits;
using rados_layout::kTokensKey;
using rados_layout::kTokensPrefix;
// Conditional deletes retried before giving up on a busy document.
constexpr int kDeleteAttempts = 8;

std::array<uint8_t, SHA256_DIGEST_LENGTH> Sha256(std::string_view bytes) {
  std::array<uint8_t, SHA256_DIGEST_LENGTH> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
         digest.data());
  return digest;
}

std::string Hex(const uint8_t* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 15]);
  }
  return out;
}

std::string OmapKey(const char* kind, std::string_view document_id) {
  return absl::StrCat(kind, AbslView(document_id));
}

std::string RefKeyOf(const StateKey& state, std::string_view document_id) {
  return absl::StrCat(kRefKey, state.Hex(), ".", AbslView(document_id));
}

ceph::bufferlist Bytes(std::string_view bytes) {
  ceph::bufferlist list;
  list.append(bytes.data(), static_cast<unsigned>(bytes.size()));
  return list;
}

// A fresh name per write: no two writes share a tokens object, so removing
// the one a commit replaced can never remove another writer's.
std::string NewTokensObjectName() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint8_t bytes[16];
  for (int i = 0; i < 2; ++i) {
    const uint64_t word = rng();
    for (int j = 0; j < 8; ++j) bytes[8 * i + j] = (word >> (8 * j)) & 0xff;
  }
  return absl::StrCat(kTokensPrefix, Hex(bytes, sizeof(bytes)));
}

NamedStateRefs RefsOf(const DocumentRecord& record) {
  NamedStateRefs refs;
  for (const SegmentBoundary& segment : record.segments) {
    refs[segment.state_key] = record.pinned;
  }
  for (const auto& [mode, state] : record.mode_states) {
    refs[state] = record.pinned;
  }
  return refs;
}

// The revision the index stores, or nullopt when it does not parse.
std::optional<int64_t> ParseRevision(const std::optional<std::string>& text) {
  if (!text.has_value()) return 0;
  int64_t revision = 0;
  if (!absl::SimpleAtoi(*text, &revision) || revision <= 0) {
    return std::nullopt;
  }
  return revision;
}

}  // namespace

std::string IndexObjectName(std::string_view tenant, int bucket) {
  const auto digest = Sha256(tenant);
  char suffix[8];
  std::snprintf(suffix, sizeof(suffix), ".%02x", bucket);
  return absl::StrCat(kIndexPrefix, Hex(digest.data(), digest.size()), suffix);
}

std::string IndexObjectName(std::string_view tenant,
                            std::string_view document_id) {
  return IndexObjectName(tenant, Sha256(document_id)[0] % kRadosIndexBuckets);
}

absl::StatusOr<std::unique_ptr<RadosDocumentCatalog>>
RadosDocumentCatalog::Open(RadosCluster& cluster, const std::string& pool,
                           StateStore& states,
                           RecordWatchOptions watch_options) {
  absl::StatusOr<librados::IoCtx> io = cluster.OpenPool(pool, /*create=*/true);
  if (!io.ok()) return io.status();
  auto watch = std::make_unique<RadosRecordWatch>(cluster, *io, watch_options);
  return std::unique_ptr<RadosDocumentCatalog>(
      new RadosDocumentCatalog(*std::move(io), states, std::move(watch)));
}

void RadosDocumentCatalog::AnnounceCommit(int r,
                                          const std::string& index_object) {
  if (r >= 0 || absl::IsUnavailable(FromRados(r, ""))) {
    watch_->Announce(index_object);
  }
}

absl::Status RadosDocumentCatalog::CountLoss(absl::Status status) {
  if (absl::IsDataLoss(status)) catalog_corruptions_.fetch_add(1);
  return status;
}

absl::StatusOr<RadosDocumentCatalog::IndexEntry>
RadosDocumentCatalog::ReadEntry(const DocumentRef& document) {
  const std::string& id = document.document_id;
  const std::string record_key = OmapKey(kRecordKey, id);
  const std::string revision_key = OmapKey(kRevisionKey, id);
  const std::string tokens_key = OmapKey(kTokensKey, id);
  librados::ObjectReadOperation op;
  std::map<std::string, ceph::bufferlist> values;
  int read = 0;
  op.omap_get_vals_by_keys({record_key, revision_key, tokens_key}, &values,
                           &read);
  const int r =
      pool_.operate(IndexObjectName(document.tenant, id), &op, nullptr);
  IndexEntry entry;
  if (r == -ENOENT) return entry;  // no document of this bucket yet
  if (absl::Status s = FromRados(
          r < 0 ? r : read,
          absl::StrCat("reading ", DocumentName(document.tenant, id)));
      !s.ok()) {
    return s;
  }
  auto take = [&values](const std::string& key) -> std::optional<std::string> {
    auto it = values.find(key);
    if (it == values.end()) return std::nullopt;
    return it->second.to_str();
  };
  entry.record = take(record_key);
  entry.revision = take(revision_key);
  entry.tokens_object = take(tokens_key);
  return entry;
}

absl::StatusOr<DocumentRecord> RadosDocumentCatalog::DecodeEntry(
    const DocumentRef& document, const IndexEntry& entry) {
  const std::string name = DocumentName(document.tenant, document.document_id);
  if (!entry.record.has_value()) {
    return absl::NotFoundError(absl::StrCat(name, " not found"));
  }
  absl::StatusOr<DocumentRecord> record =
      DecodeRecordFor(*entry.record, document.tenant, document.document_id);
  if (!record.ok()) {
    return CountLoss(Annotate(record.status(), absl::StrCat(name, " record")));
  }
  return record;
}

absl::StatusOr<NamedStateRefs> RadosDocumentCatalog::StoredRefs(
    const DocumentRef& document, const absl::StatusOr<DocumentRecord>& record) {
  if (record.ok()) return RefsOf(*record);
  if (absl::IsNotFound(record.status())) return NamedStateRefs();
  if (!absl::IsDataLoss(record.status())) return record.status();
  // A record that no longer decodes still has its refs: they say what it
  // named. They sit under the state's key, so the bucket's refs are read.
  const std::string object =
      IndexObjectName(document.tenant, document.document_id);
  const std::string suffix = absl::StrCat(".", AbslView(document.document_id));
  NamedStateRefs refs;
  absl::Status scanned = ForEachOmapEntry(
      pool_, object, kRefKey,
      [&](const std::string& key, const ceph::bufferlist& value) {
        const std::string_view rest = std::string_view(key).substr(2);
        if (rest.size() == kStateHexDigits + suffix.size() &&
            rest.substr(kStateHexDigits) == suffix) {
          absl::StatusOr<StateKey> state =
              StateKey::FromHex(rest.substr(0, kStateHexDigits));
          // An unreadable flag counts as pinned, the side that loses
          // nothing.
          if (state.ok()) refs[*state] = value.to_str() != "0";
        }
        return absl::OkStatus();
      });
  if (!scanned.ok()) return scanned;
  return refs;
}

absl::Status RadosDocumentCatalog::Commit(const DocumentRecord& record,
                                          const IndexEntry& entry,
                                          const std::string& tokens_object) {
  const DocumentRef document = RefOf(record);
  absl::StatusOr<DocumentRecord> existing = DecodeEntry(document, entry);
  if (!existing.ok() && !absl::IsDataLoss(existing.status()) &&
      !absl::IsNotFound(existing.status())) {
    return existing.status();
  }
  // A stored revision that does not parse, or a record without one, is
  // corrupt like a record that does not decode: any revision replaces it
  // (the repair path of document_catalog.h).
  std::optional<int64_t> stored = ParseRevision(entry.revision);
  const bool corrupt = absl::IsDataLoss(existing.status()) ||
                       !stored.has_value() ||
                       entry.record.has_value() != entry.revision.has_value();
  if (corrupt) {
    if (!absl::IsDataLoss(existing.status())) catalog_corruptions_ += 1;
    stored = record.revision;
  }
  if (record.revision != *stored) return StaleWriteError(record, *stored);
  absl::StatusOr<NamedStateRefs> old_refs = StoredRefs(document, existing);
  if (!old_refs.ok() && !absl::IsDataLoss(old_refs.status())) {
    return old_refs.status();
  }

  DocumentRecord committed = record;
  committed.revision = *stored + 1;
  const std::string& id = record.document_id;
  std::map<std::string, ceph::bufferlist> set;
  set[OmapKey(kRecordKey, id)] = Bytes(EncodeRecord(committed));
  set[OmapKey(kRevisionKey, id)] = Bytes(std::to_string(committed.revision));
  set[OmapKey(kTokensKey, id)] = Bytes(tokens_object);
  const NamedStateRefs named = RefsOf(record);
  for (const auto& [state, pinned] : named) {
    set[RefKeyOf(state, id)] = Bytes(pinned ? "1" : "0");
  }
  std::set<std::string> removed;
  if (old_refs.ok()) {
    for (const auto& [state, pinned] : *old_refs) {
      if (!named.contains(state)) removed.insert(RefKeyOf(state, id));
    }
  }

  librados::ObjectWriteOperation op;
  // The index object may not exist yet; the compare needs one to read.
  op.create(/*exclusive=*/false);
  int compared = 0;
  op.omap_cmp({{OmapKey(kRevisionKey, id),
                {entry.revision.has_value() ? Bytes(*entry.revision)
                                            : ceph::bufferlist(),
                 LIBRADOS_CMPXATTR_OP_EQ}}},
              &compared);
  if (!removed.empty()) op.omap_rm_keys(removed);
  op.omap_set(set);
  op.setxattr("twice.tenant", Bytes(record.tenant));
  const std::string index_object = IndexObjectName(record.tenant, id);
  const int r = pool_.operate(index_object, &op);
  AnnounceCommit(r, index_object);
  if (r == -ECANCELED) {
    return absl::AbortedError(
        absl::StrCat(DocumentName(record.tenant, id),
                     " was changed by another writer meanwhile (the write "
                     "was made from revision ",
                     record.revision, "); read it again"));
  }
  return FromRados(
      r, absl::StrCat("committing ", DocumentName(record.tenant, id)));
}

absl::Status RadosDocumentCatalog::PutDocument(
    const DocumentRecord& record, absl::Span<const int32_t> tokens) {
  if (absl::Status s = ValidateDocumentRecord(record); !s.ok()) return s;
  if (static_cast<int64_t>(tokens.size()) != record.token_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("record says ", record.token_count, " tokens, ",
                     tokens.size(), " given"));
  }
  // Tokens first: the record is committed only once they are durable.
  const std::string tokens_object = NewTokensObjectName();
  const std::string encoded = EncodeTokens(tokens);
  // Striped like a large state: a document of more than 16 M tokens is
  // past the cluster's write limit.
  if (absl::Status put = PutStripedObject(
          pool_, tokens_object, encoded,
          {{"twice.tenant", record.tenant},
           {"twice.document", record.document_id},
           {"twice.written_unix_ms", std::to_string(UnixMillisNow())}},
          RadosStateStore::kDefaultPartBytes);
      !put.ok()) {
    return put;
  }
  absl::StatusOr<IndexEntry> entry = ReadEntry(RefOf(record));
  absl::Status committed =
      entry.ok() ? Commit(record, *entry, tokens_object) : entry.status();
  if (committed.ok()) {
    // The replaced tokens are named by no record now; a failed removal
    // leaves them to the janitor.
    if (entry->tokens_object.has_value() &&
        *entry->tokens_object != tokens_object) {
      (void)RemoveStripedObject(pool_, *entry->tokens_object);
    }
  } else if (!absl::IsUnavailable(committed)) {
    // Certainly not committed. (After UNAVAILABLE it may have been: the
    // object stays, and the janitor removes it if no record names it.)
    (void)RemoveStripedObject(pool_, tokens_object);
  }
  return committed;
}

absl::Status RadosDocumentCatalog::UpdateDocument(
    const DocumentRecord& record) {
  if (absl::Status s = ValidateDocumentRecord(record); !s.ok()) return s;
  const DocumentRef document = RefOf(record);
  absl::StatusOr<IndexEntry> entry = ReadEntry(document);
  if (!entry.ok()) return entry.status();
  // As in the RocksDB store, the stored record's token_count stands for the
  // tokens, read only when the record does not decode.
  int64_t stored_token_count = 0;
  absl::StatusOr<DocumentRecord> existing = DecodeEntry(document, *entry);
  if (existing.ok()) {
    stored_token_count = existing->token_count;
  } else if (absl::IsDataLoss(existing.status())) {
    absl::StatusOr<std::vector<int32_t>> tokens = GetTokens(document);
    if (!tokens.ok()) return tokens.status();
    stored_token_count = static_cast<int64_t>(tokens->size());
  } else {
    return existing.status();
  }
  if (!entry->tokens_object.has_value()) {
    return CountLoss(absl::DataLossError(absl::StrCat(
        DocumentName(record.tenant, record.document_id), " names no tokens")));
  }
  if (absl::Status same = CheckUnchangedTokenCount(record, stored_token_count);
      !same.ok()) {
    return same;
  }
  return Commit(record, *entry, *entry->tokens_object);
}

absl::StatusOr<DocumentRecord> RadosDocumentCatalog::GetDocument(
    const DocumentRef& document) {
  if (absl::Status s = CheckDocumentRef(document.tenant, document.document_id);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<IndexEntry> entry = ReadEntry(document);
  if (!entry.ok()) return entry.status();
  return DecodeEntry(document, *entry);
}

absl::StatusOr<std::vector<int32_t>> RadosDocumentCatalog::GetTokens(
    const DocumentRef& document) {
  if (absl::Status s = CheckDocumentRef(document.tenant, document.document_id);
      !s.ok()) {
    return s;
  }
  const std::string name = DocumentName(document.tenant, document.document_id);
  std::optional<std::string> missing;
  while (true) {
    absl::StatusOr<IndexEntry> entry = ReadEntry(document);
    if (!entry.ok()) return entry.status();
    if (!entry->tokens_object.has_value()) {
      return absl::NotFoundError(
          absl::StrCat("tokens of ", name, " not found"));
    }
    // The same name missing twice is lost; a new name means a write
    // replaced the tokens between reading the index and the object.
    if (missing == entry->tokens_object) {
      return CountLoss(absl::DataLossError(absl::StrCat(
          "tokens of ", name, " (object ", *missing, ") are missing")));
    }
    absl::StatusOr<ceph::bufferlist> stored =
        ReadStripedObject(pool_, *entry->tokens_object);
    if (absl::IsNotFound(stored.status())) {
      missing = entry->tokens_object;
      continue;
    }
    if (absl::IsDataLoss(stored.status())) {
      return CountLoss(
          Annotate(stored.status(), absl::StrCat("tokens of ", name)));
    }
    if (!stored.ok()) return stored.status();
    absl::StatusOr<std::vector<int32_t>> tokens =
        DecodeTokens(std::string_view(stored->c_str(), stored->length()));
    if (!tokens.ok()) {
      return CountLoss(
          Annotate(tokens.status(), absl::StrCat("tokens of ", name)));
    }
    return tokens;
  }
}

absl::StatusOr<DocumentPage> RadosDocumentCatalog::ListDocuments(
    std::string_view tenant, int page_size, std::string_view page_token) {
  if (absl::Status s = ValidateTenant(tenant); !s.ok()) return s;
  absl::StatusOr<int> size = DocumentPageSize(page_size);
  if (!size.ok()) return size.status();
  page_size = *size;
  // Each bucket holds its ids in order; the first page_size of all of them
  // are among the first page_size of each. The token is the last id
  // returned, so a listing resumes after it even when it was deleted.
  const std::string after = OmapKey(kRecordKey, page_token);
  std::map<std::string, std::string> records;  // by id: merged in order
  bool more = false;
  for (int bucket = 0; bucket < kRadosIndexBuckets; ++bucket) {
    librados::ObjectReadOperation op;
    std::map<std::string, ceph::bufferlist> values;
    bool bucket_more = false;
    int read = 0;
    op.omap_get_vals2(after, kRecordKey, static_cast<uint64_t>(page_size),
                      &values, &bucket_more, &read);
    const std::string object = IndexObjectName(tenant, bucket);
    const int r = pool_.operate(object, &op, nullptr);
    if (r == -ENOENT) continue;
    if (absl::Status s = FromRados(
            r < 0 ? r : read, absl::StrCat("listing documents of tenant ",
                                           AbslView(tenant), " in ", object));
        !s.ok()) {
      return s;
    }
    more = more || bucket_more;
    for (auto& [key, value] : values) {
      records.emplace(key.substr(2), value.to_str());
    }
  }
  DocumentPage page;
  for (auto& [id, stored] : records) {
    if (static_cast<int>(page.records.size()) == page_size) {
      more = true;
      break;
    }
    absl::StatusOr<DocumentRecord> record = DecodeRecordFor(stored, tenant, id);
    if (!record.ok()) {
      return CountLoss(Annotate(
          record.status(), absl::StrCat(DocumentName(tenant, id), " record")));
    }
    page.records.push_back(*std::move(record));
  }
  if (more && !page.records.empty()) {
    page.next_page_token = page.records.back().document_id;
  }
  return page;
}

absl::StatusOr<int64_t> RadosDocumentCatalog::DeleteDocument(
    const DocumentRef& document) {
  if (absl::Status s = CheckDocumentRef(document.tenant, document.document_id);
      !s.ok()) {
    return s;
  }
  const std::string& id = document.document_id;
  const std::string name = DocumentName(document.tenant, id);
  for (int attempt = 0; attempt < kDeleteAttempts; ++attempt) {
    absl::StatusOr<IndexEntry> entry = ReadEntry(document);
    if (!entry.ok()) return entry.status();
    if (!entry->record.has_value() && !entry->revision.has_value()) {
      return absl::NotFoundError(absl::StrCat(name, " not found"));
    }
    absl::StatusOr<NamedStateRefs> refs =
        StoredRefs(document, DecodeEntry(document, *entry));
    if (!refs.ok()) return refs.status();

    std::set<std::string> removed = {OmapKey(kRecordKey, id),
                                     OmapKey(kRevisionKey, id),
                                     OmapKey(kTokensKey, id)};
    for (const auto& [state, pinned] : *refs) {
      removed.insert(RefKeyOf(state, id));
    }
    librados::ObjectWriteOperation op;
    int compared = 0;
    op.omap_cmp({{OmapKey(kRevisionKey, id),
                  {entry->revision.has_value() ? Bytes(*entry->revision)
                                               : ceph::bufferlist(),
                   LIBRADOS_CMPXATTR_OP_EQ}}},
                &compared);
    op.omap_rm_keys(removed);
    const std::string index_object = IndexObjectName(document.tenant, id);
    const int r = pool_.operate(index_object, &op);
    AnnounceCommit(r, index_object);
    if (r == -ECANCELED) continue;  // written meanwhile: read it again
    if (absl::Status s = FromRados(r, absl::StrCat("deleting ", name));
        !s.ok()) {
      return s;
    }

    // Committed: what follows only frees space, and whatever it leaves
    // (after an error) the janitor collects.
    if (entry->tokens_object.has_value()) {
      (void)RemoveStripedObject(pool_, *entry->tokens_object);
    }
    std::vector<StateKey> candidates;
    for (const auto& [state, pinned] : *refs) candidates.push_back(state);
    absl::StatusOr<std::vector<bool>> named =
        NamedByAnyRecord(document.tenant, candidates);
    if (!named.ok()) return 0;
    int64_t deleted = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if ((*named)[i]) continue;
      absl::StatusOr<bool> stored = states_.HasState(candidates[i]);
      if (!stored.ok() || !*stored) continue;
      if (states_.DeleteState(candidates[i]).ok()) ++deleted;
    }
    return deleted;
  }
  return absl::AbortedError(
      absl::StrCat(name, " kept changing while being deleted (",
                   kDeleteAttempts, " attempts); try again"));
}

absl::StatusOr<std::vector<bool>> RadosDocumentCatalog::NamedByAnyRecord(
    const std::string& tenant, const std::vector<StateKey>& states) {
  std::vector<bool> named(states.size(), false);
  if (states.empty()) return named;
  std::vector<std::string> prefixes;
  for (const StateKey& state : states) {
    prefixes.push_back(absl::StrCat(kRefKey, state.Hex(), "."));
  }
  // One read per bucket, asking for the first ref of every state at once.
  for (int bucket = 0; bucket < kRadosIndexBuckets; ++bucket) {
    librados::ObjectReadOperation op;
    std::vector<std::map<std::string, ceph::bufferlist>> values(states.size());
    std::vector<int> read(states.size(), 0);
    bool more = false;
    for (size_t i = 0; i < states.size(); ++i) {
      if (named[i]) continue;
      op.omap_get_vals2(prefixes[i], prefixes[i], 1, &values[i], &more,
                        &read[i]);
    }
    const std::string object = IndexObjectName(tenant, bucket);
    const int r = pool_.operate(object, &op, nullptr);
    if (r == -ENOENT) continue;
    if (absl::Status s =
            FromRados(r, absl::StrCat("reading the refs of ", object));
        !s.ok()) {
      return s;
    }
    for (size_t i = 0; i < states.size(); ++i) {
      if (read[i] < 0) {
        return FromRados(read[i], absl::StrCat("reading the refs of ", object));
      }
      if (!values[i].empty()) named[i] = true;
    }
  }
  return named;
}

}  // namespace twice::storage
