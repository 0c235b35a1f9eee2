// Opening, closing, states and stats of RocksDbStateStore; documents are in
// rocksdb_state_store_documents.cc.
#include "storage/rocksdb_state_store.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rocksdb/options.h"
#include "rocksdb/slice.h"
#include "rocksdb/write_batch.h"
#include "storage/rocksdb_status.h"

namespace twice::storage {
namespace {

rocksdb::Slice ToSlice(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace

absl::StatusOr<std::unique_ptr<StateStore>> OpenRocksDbStore(
    const RocksDbStoreOptions& options) {
  absl::StatusOr<std::unique_ptr<RocksDbStateStore>> store =
      RocksDbStateStore::Open(options);
  if (!store.ok()) return store.status();
  return std::unique_ptr<StateStore>(std::move(*store));
}

absl::StatusOr<std::unique_ptr<RocksDbStateStore>> RocksDbStateStore::Open(
    const RocksDbStoreOptions& options) {
  if (options.path.empty()) {
    return absl::InvalidArgumentError("RocksDbStoreOptions.path is empty");
  }
  if (options.ephemeral_ttl_seconds <= 0 ||
      options.ephemeral_ttl_seconds >
          std::numeric_limits<int64_t>::max() / 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("RocksDbStoreOptions.ephemeral_ttl_seconds must be "
                     "positive, got ",
                     options.ephemeral_ttl_seconds));
  }
  // Not make_unique: the constructor is private.
  std::unique_ptr<RocksDbStateStore> store(new RocksDbStateStore(options));
  if (absl::Status s = store->OpenDb(); !s.ok()) return s;
  if (absl::Status s = store->LoadCounters(); !s.ok()) return s;
  return store;
}

RocksDbStateStore::RocksDbStateStore(const RocksDbStoreOptions& options)
    : options_(options),
      ttl_filter_(std::make_unique<EphemeralTtlFilter>(
          options.ephemeral_ttl_seconds * 1000, &UnixMillisNow,
          &corruptions_)) {
  // The WAL stays on (disableWAL = false); sync decides whether an
  // acknowledged write also survives a power loss, not just a crash.
  write_options_.sync = options.sync_writes;
}

RocksDbStateStore::~RocksDbStateStore() {
  if (db_ == nullptr) return;
  // Nothing to report a failure to here; RocksDB has already made every
  // acknowledged write durable through the WAL.
  for (rocksdb::ColumnFamilyHandle* handle : handles_) {
    db_->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
  }
  db_->Close().PermitUncheckedError();
  db_.reset();
}

absl::Status RocksDbStateStore::OpenDb() {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.keep_log_file_num = 10;  // RocksDB's own info logs, not the WAL

  rocksdb::ColumnFamilyOptions plain;
  rocksdb::ColumnFamilyOptions states = plain;
  // Multi-megabyte states would make every compaction rewrite them; BlobDB
  // keeps them out of the LSM tree, and garbage collection reclaims the
  // space of deleted or overwritten ones.
  states.enable_blob_files = true;
  states.min_blob_size = kStateMinBlobBytes;
  states.enable_blob_garbage_collection = true;
  rocksdb::ColumnFamilyOptions ephemeral = plain;
  // Kept out of blob files: the compaction filter then sees every value.
  ephemeral.compaction_filter = ttl_filter_.get();

  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, plain},
      {kDocumentsFamily, plain},
      {kTokensFamily, plain},
      {kStatesFamily, states},
      {kStateIndexFamily, plain},
      {kEphemeralFamily, ephemeral},
  };
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(db_options, options_.path, families, &handles_, &db);
  if (!s.ok()) {
    return FromRocksDb(s, absl::StrCat("open state store ", options_.path));
  }
  db_.reset(db);
  documents_ = handles_[1];
  tokens_ = handles_[2];
  states_ = handles_[3];
  state_index_ = handles_[4];
  ephemeral_ = handles_[5];
  return absl::OkStatus();
}

absl::Status RocksDbStateStore::LoadCounters() {
  // Counts come from the small index entries, never from the blobs. An entry
  // that does not decode cannot be trusted to describe its state, so both
  // go, as a read would have done.
  rocksdb::WriteBatch cleanup;
  int64_t bad = 0;
  {
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), state_index_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      absl::StatusOr<StateIndexEntry> entry =
          DecodeStateIndex({it->value().data(), it->value().size()});
      if (entry.ok() && it->key().size() == sizeof(StateKey::digest)) {
        state_count_ += 1;
        state_bytes_ += entry->stored_bytes;
        continue;
      }
      if (!cleanup.Delete(states_, it->key()).ok() ||
          !cleanup.Delete(state_index_, it->key()).ok()) {
        return absl::InternalError("could not build a WriteBatch");
      }
      bad += 1;
    }
    if (absl::Status s = FromRocksDb(it->status(), "scan state index");
        !s.ok()) {
      return s;
    }
  }
  if (bad > 0) {
    if (absl::Status s = FromRocksDb(db_->Write(write_options_, &cleanup),
                                     "delete corrupt state index entries");
        !s.ok()) {
      return s;
    }
    corruptions_ += bad;
  }

  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), documents_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) document_count_ += 1;
  return FromRocksDb(it->status(), "scan documents");
}

absl::StatusOr<RocksDbStateStore::StateRead> RocksDbStateStore::ReadState(
    const StateKey& key, bool ephemeral, bool copy_blob) {
  rocksdb::PinnableSlice value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), StateFamily(ephemeral),
                               ToSlice(key.Bytes()), &value);
  StateRead read;
  if (s.IsNotFound()) return read;
  if (s.IsCorruption()) {
    // RocksDB's own checksum (block or blob record) failed: the same case as
    // ours failing, handled the same way.
    read.found = Found::kCorrupt;
    read.reason = s.ToString();
    return read;
  }
  if (!s.ok()) return FromRocksDb(s, absl::StrCat("read state ", key.Hex()));

  absl::StatusOr<StateValue> decoded =
      DecodeStateValue({value.data(), value.size()});
  if (!decoded.ok()) {
    read.found = Found::kCorrupt;
    read.reason = std::string(decoded.status().message());
    return read;
  }
  if (ephemeral && IsExpired(decoded->written_unix_ms, UnixMillisNow(),
                             options_.ephemeral_ttl_seconds * 1000)) {
    read.found = Found::kExpired;
    return read;
  }
  read.found = Found::kGood;
  if (copy_blob) read.blob.assign(decoded->blob);
  return read;
}

absl::StatusOr<std::optional<StateIndexEntry>> RocksDbStateStore::ReadIndex(
    const StateKey& key) {
  rocksdb::PinnableSlice value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), state_index_,
                               ToSlice(key.Bytes()), &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) {
    return FromRocksDb(s, absl::StrCat("read state index ", key.Hex()));
  }
  absl::StatusOr<StateIndexEntry> entry =
      DecodeStateIndex({value.data(), value.size()});
  if (!entry.ok()) return entry.status();
  return *entry;
}

absl::Status RocksDbStateStore::RemoveBadState(const StateKey& key,
                                               bool ephemeral) {
  rocksdb::WriteBatch batch;
  std::optional<StateIndexEntry> index;
  rocksdb::Status s =
      batch.Delete(StateFamily(ephemeral), ToSlice(key.Bytes()));
  if (!ephemeral) {
    absl::StatusOr<std::optional<StateIndexEntry>> read = ReadIndex(key);
    if (read.ok()) {
      index = *read;
    } else if (!absl::IsDataLoss(read.status())) {
      return read.status();
    }
    // A corrupt index entry goes too; its size is unknown, so the byte
    // counter keeps it until the next open recounts.
    if (s.ok()) s = batch.Delete(state_index_, ToSlice(key.Bytes()));
  }
  if (s.ok()) s = db_->Write(write_options_, &batch);
  if (!s.ok()) return FromRocksDb(s, absl::StrCat("delete state ", key.Hex()));
  if (index.has_value()) {
    state_count_ -= 1;
    state_bytes_ -= index->stored_bytes;
  }
  return absl::OkStatus();
}

absl::Status RocksDbStateStore::PutState(const StateKey& key,
                                         std::string_view blob,
                                         const PutStateOptions& options) {
  if (options.recompute_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("recompute_tokens must be non-negative, got ",
                     options.recompute_tokens));
  }
  const int64_t now = UnixMillisNow();
  const std::string value =
      EncodeStateValue(blob, options.recompute_tokens, now);
  const std::string context = absl::StrCat("write state ", key.Hex());
  if (options.ephemeral) {
    return FromRocksDb(db_->Put(write_options_, ephemeral_,
                                ToSlice(key.Bytes()), ToSlice(value)),
                       context);
  }

  const StateIndexEntry entry{
      .stored_bytes = static_cast<int64_t>(value.size()),
      .recompute_tokens = options.recompute_tokens,
      .written_unix_ms = now};
  std::lock_guard<std::mutex> lock(StateLock(key));
  absl::StatusOr<std::optional<StateIndexEntry>> previous = ReadIndex(key);
  if (!previous.ok() && !absl::IsDataLoss(previous.status())) {
    return previous.status();
  }
  rocksdb::WriteBatch batch;
  rocksdb::Status s = batch.Put(states_, ToSlice(key.Bytes()), ToSlice(value));
  if (s.ok()) {
    s = batch.Put(state_index_, ToSlice(key.Bytes()),
                  ToSlice(EncodeStateIndex(entry)));
  }
  if (s.ok()) s = db_->Write(write_options_, &batch);
  if (!s.ok()) return FromRocksDb(s, context);

  if (!previous.ok()) {
    // The old entry was unreadable and is now replaced: count it as a
    // corruption. Its size is unknown; see RemoveBadState.
    corruptions_ += 1;
    state_bytes_ += entry.stored_bytes;
  } else if (previous->has_value()) {
    state_bytes_ += entry.stored_bytes - (*previous)->stored_bytes;
  } else {
    state_count_ += 1;
    state_bytes_ += entry.stored_bytes;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RocksDbStateStore::GetState(const StateKey& key,
                                                        bool ephemeral) {
  absl::StatusOr<StateRead> read = ReadState(key, ephemeral, true);
  if (!read.ok()) return read.status();
  std::unique_lock<std::mutex> lock;
  if (read->found == Found::kCorrupt || read->found == Found::kExpired) {
    // Look again under the key's lock before deleting: a concurrent
    // PutState may have just replaced the bad value with a good one.
    lock = std::unique_lock<std::mutex>(StateLock(key));
    read = ReadState(key, ephemeral, true);
    if (!read.ok()) return read.status();
  }

  switch (read->found) {
    case Found::kGood:
      hits_ += 1;
      return std::move(read->blob);
    case Found::kMissing:
      misses_ += 1;
      return absl::NotFoundError(
          absl::StrCat("state ", key.Hex(), " not found"));
    case Found::kExpired:
      if (absl::Status s = RemoveBadState(key, ephemeral); !s.ok()) return s;
      misses_ += 1;
      return absl::NotFoundError(
          absl::StrCat("state ", key.Hex(), " not found (expired)"));
    case Found::kCorrupt:
      if (absl::Status s = RemoveBadState(key, ephemeral); !s.ok()) return s;
      misses_ += 1;
      corruptions_ += 1;
      return absl::NotFoundError(absl::StrCat("state ", key.Hex(),
                                              " was corrupt (", read->reason,
                                              ") and has been deleted"));
  }
  return absl::InternalError("unreachable");
}

absl::StatusOr<bool> RocksDbStateStore::HasState(const StateKey& key,
                                                 bool ephemeral) {
  if (!ephemeral) {
    // The index entry exists exactly when the state does (one WriteBatch).
    absl::StatusOr<std::optional<StateIndexEntry>> index = ReadIndex(key);
    if (index.ok()) return index->has_value();
    if (absl::IsDataLoss(index.status())) return true;  // GetState verifies
    return index.status();
  }
  // Ephemeral values carry their own age, so the value is read; expired
  // ones count as absent. Corrupt ones are left for GetState to report.
  absl::StatusOr<StateRead> read = ReadState(key, true, false);
  if (!read.ok()) return read.status();
  return read->found == Found::kGood || read->found == Found::kCorrupt;
}

absl::Status RocksDbStateStore::DeleteState(const StateKey& key,
                                            bool ephemeral) {
  const std::string context = absl::StrCat("delete state ", key.Hex());
  if (ephemeral) {
    return FromRocksDb(
        db_->Delete(write_options_, ephemeral_, ToSlice(key.Bytes())), context);
  }
  std::lock_guard<std::mutex> lock(StateLock(key));
  absl::StatusOr<std::optional<StateIndexEntry>> index = ReadIndex(key);
  if (!index.ok() && !absl::IsDataLoss(index.status())) return index.status();
  rocksdb::WriteBatch batch;
  rocksdb::Status s = batch.Delete(states_, ToSlice(key.Bytes()));
  if (s.ok()) s = batch.Delete(state_index_, ToSlice(key.Bytes()));
  if (s.ok()) s = db_->Write(write_options_, &batch);
  if (!s.ok()) return FromRocksDb(s, context);
  if (index.ok() && index->has_value()) {
    state_count_ -= 1;
    state_bytes_ -= (*index)->stored_bytes;
  }
  return absl::OkStatus();
}

void RocksDbStateStore::RecordRecompute() { recomputes_ += 1; }

StoreStats RocksDbStateStore::Stats() {
  StoreStats stats;
  stats.state_bytes = state_bytes_.load();
  stats.state_count = state_count_.load();
  stats.document_count = document_count_.load();
  stats.hits = hits_.load();
  stats.misses = misses_.load();
  stats.evictions = evictions_.load();
  stats.corruptions = corruptions_.load();
  stats.recomputes = recomputes_.load();
  return stats;
}

absl::Status RocksDbStateStore::CompactEphemeral() {
  rocksdb::Status s = db_->Flush(rocksdb::FlushOptions(), ephemeral_);
  if (!s.ok()) return FromRocksDb(s, "flush ephemeral states");
  rocksdb::CompactRangeOptions compact;
  // Without kForce a lone bottommost file is left as is, unfiltered.
  compact.bottommost_level_compaction =
      rocksdb::BottommostLevelCompaction::kForce;
  return FromRocksDb(db_->CompactRange(compact, ephemeral_, nullptr, nullptr),
                     "compact ephemeral states");
}

}  // namespace twice::storage
