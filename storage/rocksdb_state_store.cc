// Opening, loading, closing and stats of RocksDbStateStore. States are in
// rocksdb_state_store_states.cc, chunked states in _blocks.cc, eviction in
// _eviction.cc, documents in _documents.cc, administration in _admin.cc.
#include "storage/rocksdb_state_store.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rocksdb/cache.h"
#include "rocksdb/options.h"
#include "rocksdb/slice.h"
#include "rocksdb/sst_file_manager.h"
#include "storage/background_error_listener.h"
#include "storage/record_codec.h"
#include "storage/rocksdb_status.h"
#include "storage/state_ref.h"

namespace twice::storage {
absl::StatusOr<std::unique_ptr<Store>> OpenRocksDbStore(
    const RocksDbStoreOptions& options) {
  absl::StatusOr<std::unique_ptr<RocksDbStateStore>> store =
      RocksDbStateStore::Open(options);
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(std::move(*store));
}

absl::StatusOr<std::unique_ptr<RocksDbStateStore>> RocksDbStateStore::Open(
    const RocksDbStoreOptions& options) {
  if (options.path.empty()) {
    return absl::InvalidArgumentError("RocksDbStoreOptions.path is empty");
  }
  if (options.state_budget_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RocksDbStoreOptions.state_budget_bytes must be "
                     "non-negative, got ",
                     options.state_budget_bytes));
  }
  if (options.tenant_state_budget_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RocksDbStoreOptions.tenant_state_budget_bytes must be "
                     "non-negative, got ",
                     options.tenant_state_budget_bytes));
  }
  if (options.state_cache_bytes < 0) {
    return absl::InvalidArgumentError(
        "RocksDbStoreOptions.state_cache_bytes must be non-negative");
  }
  if (!(options.eviction_cost_weight >= 0) ||
      options.eviction_cost_weight > 1e6) {
    return absl::InvalidArgumentError(
        "RocksDbStoreOptions.eviction_cost_weight must be in [0, 1e6]");
  }
  // Not make_unique: the constructor is private.
  std::unique_ptr<RocksDbStateStore> store(new RocksDbStateStore(options));
  if (absl::Status s = store->OpenDb(); !s.ok()) return s;
  if (absl::Status s = store->Load(); !s.ok()) return s;
  return store;
}

RocksDbStateStore::RocksDbStateStore(const RocksDbStoreOptions& options)
    : options_(options), disk_(options.path, options.min_free_disk_bytes) {
  // The WAL stays on (disableWAL = false); sync decides whether an
  // acknowledged write also survives a power loss, not just a crash.
  write_options_.sync = options.sync_writes;
  unsynced_write_options_.sync = false;
  state_read_options_.verify_checksums = false;
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
  // With a file manager RocksDB keeps room for compactions and, after a
  // background write failed for lack of space, resumes by itself once
  // space is back (otherwise the database stays read-only until reopened).
  db_options.sst_file_manager.reset(
      rocksdb::NewSstFileManager(rocksdb::Env::Default()));
  db_options.max_total_wal_size = static_cast<uint64_t>(options_.max_wal_bytes);
  db_options.listeners.push_back(std::make_shared<BackgroundErrorListener>(
      &corruptions_, &catalog_corruptions_));

  rocksdb::ColumnFamilyOptions plain;
  rocksdb::ColumnFamilyOptions states = plain;
  // Multi-megabyte states would make every compaction rewrite them; BlobDB
  // keeps them out of the LSM tree, and garbage collection reclaims the
  // space of deleted or overwritten ones.
  states.enable_blob_files = true;
  states.min_blob_size = kStateMinBlobBytes;
  states.enable_blob_garbage_collection = true;
  if (options_.state_cache_bytes > 0) {
    // Shards of at least 512 MiB (one shard below that), so a shard holds
    // several of the largest states: an entry larger than its shard would
    // be dropped as soon as it is read, and one mutex per read of megabytes
    // is no contention.
    int shard_bits = 0;
    while (shard_bits < 6 && (options_.state_cache_bytes >> (shard_bits + 1)) >=
                                 (int64_t{512} << 20)) {
      ++shard_bits;
    }
    states.blob_cache = rocksdb::NewLRUCache(
        static_cast<size_t>(options_.state_cache_bytes), shard_bits);
    states.prepopulate_blob_cache = rocksdb::PrepopulateBlobCache::kFlushOnly;
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, plain},
      {kDocumentsFamily, plain},
      {kTokensFamily, plain},
      {kStatesFamily, states},
      {kStateIndexFamily, plain},
      {kRefsFamily, plain},
  };
  // RocksDB opens a database only with every family it holds: a store
  // written before second reads moved into the decode call has one more,
  // whose states lived for one request. It is opened, then dropped.
  std::vector<std::string> existing;
  const bool legacy =
      rocksdb::DB::ListColumnFamilies(db_options, options_.path, &existing)
          .ok() &&
      std::find(existing.begin(), existing.end(), kLegacyEphemeralFamily) !=
          existing.end();
  if (legacy) families.push_back({kLegacyEphemeralFamily, plain});
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(db_options, options_.path, families, &handles_, &db);
  if (!s.ok()) {
    return FromRocksDb(s, absl::StrCat("open state store ", options_.path));
  }
  db_.reset(db);
  if (legacy) {
    rocksdb::ColumnFamilyHandle* dropped = handles_.back();
    handles_.pop_back();
    s = db_->DropColumnFamily(dropped);
    rocksdb::Status destroyed = db_->DestroyColumnFamilyHandle(dropped);
    if (s.ok()) s = destroyed;
    if (!s.ok()) {
      return FromRocksDb(
          s, absl::StrCat("drop the ephemeral family of ", options_.path));
    }
  }
  documents_ = handles_[1];
  tokens_ = handles_[2];
  states_ = handles_[3];
  state_index_ = handles_[4];
  refs_ = handles_[5];
  return absl::OkStatus();
}

absl::Status RocksDbStateStore::Load() {
  // Index entries first, never the blobs. An entry that does not decode
  // cannot be trusted to describe its state, so both go, as a read would
  // have done.
  struct Loaded {
    StateKey key;
    StateIndexEntry entry;
  };
  std::vector<Loaded> loaded;
  rocksdb::WriteBatch cleanup;
  int64_t bad = 0;
  {
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), state_index_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const std::string_view raw_key(it->key().data(), it->key().size());
      absl::StatusOr<StateIndexEntry> entry =
          DecodeStateIndex({it->value().data(), it->value().size()});
      absl::StatusOr<StateKey> key = StateKey::FromBytes(raw_key);
      if (entry.ok() && key.ok()) {
        loaded.push_back({*key, *entry});
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
  // Recency restarts from write order; blocks go in before the manifests
  // that name them.
  std::stable_sort(loaded.begin(), loaded.end(),
                   [](const Loaded& a, const Loaded& b) {
                     const bool a_block = a.entry.form == StateForm::kBlock;
                     const bool b_block = b.entry.form == StateForm::kBlock;
                     if (a_block != b_block) return a_block;
                     return a.entry.written_unix_ms < b.entry.written_unix_ms;
                   });
  for (const Loaded& l : loaded) {
    CachedState state{.stored_bytes = l.entry.stored_bytes,
                      .recompute_tokens = l.entry.recompute_tokens,
                      .flops_per_token = l.entry.flops_per_token,
                      .form = l.entry.form,
                      .blocks = {},
                      .tenant = l.entry.tenant};
    if (l.entry.form == StateForm::kManifest) {
      // Manifests are small (inline in the LSM tree), so reading them all
      // here is cheap. One that is unreadable or lists a missing block can
      // never be served and goes now.
      std::string value;
      rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), states_,
                                   ToSlice(l.key.Bytes()), &value);
      absl::StatusOr<BlockManifest> manifest =
          s.ok() ? DecodeManifest(value) : absl::DataLossError(s.ToString());
      bool complete = manifest.ok();
      if (complete) {
        for (const BlockRef& block : manifest->blocks) {
          if (!index_.Contains(block.key)) complete = false;
          state.blocks.push_back(block.key);
        }
      }
      if (!complete) {
        if (!cleanup.Delete(states_, ToSlice(l.key.Bytes())).ok() ||
            !cleanup.Delete(state_index_, ToSlice(l.key.Bytes())).ok()) {
          return absl::InternalError("could not build a WriteBatch");
        }
        if (!manifest.ok() && !s.IsNotFound()) bad += 1;
        continue;
      }
    }
    index_.Upsert(l.key, state);
  }
  // Blocks that no manifest names (their manifest went above) go too.
  for (const StateKey& block : index_.OrphanBlocks()) {
    if (!cleanup.Delete(states_, ToSlice(block.Bytes())).ok() ||
        !cleanup.Delete(state_index_, ToSlice(block.Bytes())).ok()) {
      return absl::InternalError("could not build a WriteBatch");
    }
    index_.Remove(block, nullptr);
  }
  if (cleanup.Count() > 0) {
    if (absl::Status s = FromRocksDb(db_->Write(write_options_, &cleanup),
                                     "delete unreadable states");
        !s.ok()) {
      return s;
    }
    corruptions_ += bad;
  }

  {
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), documents_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) document_count_ += 1;
    // A damaged block of records stops the count (it is then a lower
    // bound) but not the store: the records it holds answer DATA_LOSS,
    // Verify lists them, and every other document stays readable.
    if (absl::Status s = FromRocksDb(it->status(), "scan documents"); !s.ok()) {
      if (!absl::IsDataLoss(s)) return s;
      (void)CountCatalogLoss(s);
      std::fprintf(stderr, "twice: storage: %s: %s\n", options_.path.c_str(),
                   std::string(s.message()).c_str());
    }
  }
  return LoadRefs();
}

absl::Status RocksDbStateStore::LoadRefs() {
  int64_t refs = 0;
  std::vector<std::string> bad_refs;
  {
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), refs_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const std::string_view key(it->key().data(), it->key().size());
      absl::StatusOr<RefKeyParts> parts = ParseRefKey(key);
      absl::StatusOr<bool> pinned =
          DecodeRef({it->value().data(), it->value().size()});
      if (!parts.ok() || !pinned.ok()) {
        bad_refs.emplace_back(key);
        continue;
      }
      index_.AddRefs(parts->state, 1, *pinned ? 1 : 0);
      refs += 1;
    }
    if (absl::Status s = FromRocksDb(it->status(), "scan refs"); !s.ok()) {
      return s;
    }
  }
  // Refs are derived from records, so a bad one is rebuilt from its record
  // (which may pin the state), and a store written before refs existed gets
  // all of them: both by rewriting the records concerned.
  std::set<std::string> rebuild;
  const bool scan_existing = !bad_refs.empty();
  for (const std::string& key : bad_refs) {
    corruptions_ += 1;
    if (!db_->Delete(unsynced_write_options_, refs_, ToSlice(key)).ok()) {
      return absl::InternalError("could not delete a bad ref");
    }
    absl::StatusOr<RefKeyParts> parts = ParseRefKey(key);
    if (parts.ok()) rebuild.emplace(parts->document_key);
  }
  if (refs == 0 && document_count_.load() > 0) {
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), documents_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      rebuild.emplace(it->key().data(), it->key().size());
    }
    // Damage (counted above) only leaves its records without refs.
    if (absl::Status s = FromRocksDb(it->status(), "scan documents");
        !s.ok() && !absl::IsDataLoss(s)) {
      return s;
    }
  }
  std::lock_guard<std::mutex> lock(document_mu_);
  for (const std::string& document_key : rebuild) {
    const size_t nul = document_key.find('\0');
    if (nul == std::string::npos) continue;
    absl::StatusOr<DocumentRecord> record =
        ReadRecord(std::string_view(document_key).substr(0, nul),
                   std::string_view(document_key).substr(nul + 1));
    if (!record.ok()) continue;  // a bad record names nothing we can see
    if (absl::Status s = RebuildRefsLocked(*record, scan_existing); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

void RocksDbStateStore::RecordRecompute() { recomputes_ += 1; }

int64_t RocksDbStateStore::DiskBytes() {
  int64_t total = 0;
  for (rocksdb::ColumnFamilyHandle* handle : handles_) {
    uint64_t value = 0;
    if (db_->GetIntProperty(handle, rocksdb::DB::Properties::kLiveSstFilesSize,
                            &value)) {
      total += static_cast<int64_t>(value);
    }
    if (db_->GetIntProperty(handle, rocksdb::DB::Properties::kLiveBlobFileSize,
                            &value)) {
      total += static_cast<int64_t>(value);
    }
  }
  return total;
}

StoreStats RocksDbStateStore::Stats() {
  const CacheTotals totals = index_.Totals();
  StoreStats stats;
  stats.state_bytes = totals.bytes;
  stats.state_count = totals.states;
  stats.block_count = totals.blocks;
  stats.pinned_state_count = totals.pinned_states;
  stats.document_count = document_count_.load();
  stats.hits = hits_.load();
  stats.misses = misses_.load();
  stats.evictions = evictions_.load();
  stats.evicted_bytes = evicted_bytes_.load();
  stats.corruptions = corruptions_.load();
  stats.catalog_corruptions = catalog_corruptions_.load();
  stats.recomputes = recomputes_.load();
  stats.budget_bytes = options_.state_budget_bytes;
  stats.disk_bytes = DiskBytes();
  return stats;
}

}  // namespace twice::storage
