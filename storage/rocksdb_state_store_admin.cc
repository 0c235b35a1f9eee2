// Administration of RocksDbStateStore: verify, compact, garbage collection.
// Each walks or rewrites the whole store while serving goes on; none holds a
// lock longer than one key's change.
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rocksdb/options.h"
#include "rocksdb/slice.h"
#include "storage/absl_view.h"
#include "storage/rocksdb_state_store.h"
#include "storage/rocksdb_status.h"
#include "storage/state_ref.h"

namespace twice::storage {
namespace {

// "tenant/document_id" of a documents-family key, for reports.
std::string PrintableDocument(std::string_view document_key) {
  std::string out(document_key);
  const size_t nul = out.find('\0');
  if (nul != std::string::npos) out[nul] = '/';
  return out;
}

}  // namespace

absl::Status RocksDbStateStore::ScanStopped(std::string_view family,
                                            const rocksdb::Status& status,
                                            std::string_view after,
                                            VerifyReport& report) {
  std::string context =
      absl::StrCat("the scan of ", AbslView(family), " stopped");
  if (!after.empty()) absl::StrAppend(&context, " after ", AbslView(after));
  absl::Status s = FromRocksDb(status, context);
  if (!absl::IsDataLoss(s)) return s;
  // A damaged block ends an iterator without naming the keys in or past
  // it; the report says how far the scan got.
  report.bad.push_back(
      {std::string(family), "(scan)", std::string(s.message())});
  catalog_corruptions_ += 1;
  return absl::OkStatus();
}

absl::StatusOr<VerifyReport> RocksDbStateStore::Verify(
    const VerifyOptions& options) {
  VerifyReport report;
  // Durable states, by the index: blocks first, so manifests can be checked
  // against the blocks' actual sizes and checksums without reading them
  // twice.
  std::unordered_map<StateKey, BlockRef, StateKeyHash> blocks;
  KeySet bad_states;
  auto bad_state = [&](const StateKey& key, std::string reason) {
    report.bad.push_back({kStatesFamily, key.Hex(), std::move(reason)});
    bad_states.insert(key);
  };
  for (StateForm form :
       {StateForm::kBlock, StateForm::kWhole, StateForm::kManifest}) {
    for (const StateKey& key : index_.Keys(form)) {
      rocksdb::PinnableSlice value;
      rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), states_,
                                   ToSlice(key.Bytes()), &value);
      if (s.IsNotFound()) continue;  // deleted since the keys were listed
      report.states_checked += 1;
      if (!s.ok() && !s.IsCorruption()) {
        return FromRocksDb(s, absl::StrCat("verify state ", key.Hex()));
      }
      if (s.IsCorruption()) {
        bad_state(key, s.ToString());
        continue;
      }
      report.bytes_checked += static_cast<int64_t>(value.size());
      const std::string_view stored(value.data(), value.size());
      if (form != StateForm::kManifest) {
        absl::StatusOr<StateValue> decoded = DecodeStateValue(stored);
        if (!decoded.ok()) {
          bad_state(key, std::string(decoded.status().message()));
        } else if (form == StateForm::kBlock) {
          blocks[key] = {key, static_cast<int64_t>(decoded->blob.size()),
                         BlockChecksum(decoded->blob)};
        }
        continue;
      }
      absl::StatusOr<BlockManifest> manifest = DecodeManifest(stored);
      if (!manifest.ok()) {
        bad_state(key, std::string(manifest.status().message()));
        continue;
      }
      for (size_t i = 0; i < manifest->blocks.size(); ++i) {
        const BlockRef& ref = manifest->blocks[i];
        auto it = blocks.find(ref.key);
        if (it == blocks.end()) {
          bad_state(key, absl::StrCat("block ", i, " is missing or bad"));
          break;
        }
        if (it->second.bytes != ref.bytes ||
            it->second.checksum != ref.checksum) {
          bad_state(key,
                    absl::StrCat("block ", i, " does not match the manifest"));
          break;
        }
      }
    }
  }
  if (options.repair && !bad_states.empty()) {
    absl::StatusOr<Deleted> deleted =
        DeleteDurable(bad_states, nullptr, write_options_);
    if (!deleted.ok()) return deleted.status();
    corruptions_ += static_cast<int64_t>(bad_states.size());
    report.repaired += static_cast<int64_t>(bad_states.size());
  }

  // Records and their tokens: reported only, tokens being the truth. The
  // keys come from both families, so a record in a damaged block is still
  // found (and read, and reported) through its tokens, and the other way
  // round.
  {
    std::set<std::string> document_keys;
    for (const auto& [family, handle] :
         {std::pair{kDocumentsFamily, documents_}, {kTokensFamily, tokens_}}) {
      std::unique_ptr<rocksdb::Iterator> it(
          db_->NewIterator(rocksdb::ReadOptions(), handle));
      std::string last;
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        last.assign(it->key().data(), it->key().size());
        document_keys.insert(last);
      }
      if (absl::Status s = ScanStopped(family, it->status(),
                                       PrintableDocument(last), report);
          !s.ok()) {
        return s;
      }
    }
    for (const std::string& key : document_keys) {
      const size_t nul = key.find('\0');
      if (nul == std::string::npos) {
        report.bad.push_back({kDocumentsFamily, PrintableDocument(key),
                              "key has no tenant separator"});
        continue;
      }
      const std::string_view tenant = std::string_view(key).substr(0, nul);
      const std::string_view id = std::string_view(key).substr(nul + 1);
      report.documents_checked += 1;
      absl::StatusOr<DocumentRecord> record = ReadRecord(tenant, id);
      if (absl::IsNotFound(record.status())) continue;  // deleted meanwhile
      if (!record.ok()) {
        report.bad.push_back({kDocumentsFamily, PrintableDocument(key),
                              std::string(record.status().message())});
      }
      absl::StatusOr<std::vector<int32_t>> tokens =
          GetTokens({std::string(tenant), std::string(id)});
      if (!tokens.ok()) {
        report.bad.push_back({kTokensFamily, PrintableDocument(key),
                              std::string(tokens.status().message())});
      } else if (record.ok() &&
                 static_cast<int64_t>(tokens->size()) != record->token_count) {
        report.bad.push_back(
            {kTokensFamily, PrintableDocument(key),
             absl::StrCat("holds ", tokens->size(), " tokens, the record says ",
                          record->token_count)});
      }
    }
  }

  // References: derived from records, so a bad one is rebuilt from its
  // record when repairing.
  {
    std::vector<std::string> bad_keys;
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), refs_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      report.refs_checked += 1;
      const std::string_view key(it->key().data(), it->key().size());
      absl::StatusOr<RefKeyParts> parts = ParseRefKey(key);
      absl::StatusOr<bool> pinned =
          DecodeRef({it->value().data(), it->value().size()});
      if (parts.ok() && pinned.ok()) continue;
      report.bad.push_back(
          {kRefsFamily,
           parts.ok() ? absl::StrCat(parts->state.Hex(), " ",
                                     PrintableDocument(parts->document_key))
                      : "(malformed key)",
           std::string(parts.ok() ? pinned.status().message()
                                  : parts.status().message())});
      bad_keys.emplace_back(key);
    }
    if (absl::Status s = ScanStopped(kRefsFamily, it->status(), "", report);
        !s.ok()) {
      return s;
    }
    if (options.repair && !bad_keys.empty()) {
      std::lock_guard<std::mutex> lock(document_mu_);
      for (const std::string& key : bad_keys) {
        absl::StatusOr<RefKeyParts> parts = ParseRefKey(key);
        if (absl::Status s =
                FromRocksDb(db_->Delete(write_options_, refs_, ToSlice(key)),
                            "delete a bad ref");
            !s.ok()) {
          return s;
        }
        corruptions_ += 1;
        report.repaired += 1;
        if (!parts.ok()) continue;
        const std::string document_key(parts->document_key);
        const size_t nul = document_key.find('\0');
        if (nul == std::string::npos) continue;
        absl::StatusOr<DocumentRecord> record =
            ReadRecord(std::string_view(document_key).substr(0, nul),
                       std::string_view(document_key).substr(nul + 1));
        if (!record.ok()) continue;
        if (absl::Status s = RebuildRefsLocked(*record, true); !s.ok()) {
          return s;
        }
      }
    }
  }
  return report;
}

absl::StatusOr<CompactReport> RocksDbStateStore::Compact() {
  CompactReport report;
  report.disk_bytes_before = DiskBytes();
  rocksdb::Status s = db_->Flush(rocksdb::FlushOptions(), handles_);
  if (!s.ok()) return FromRocksDb(s, "flush");
  rocksdb::CompactRangeOptions compact;
  compact.bottommost_level_compaction =
      rocksdb::BottommostLevelCompaction::kForce;
  for (rocksdb::ColumnFamilyHandle* handle : handles_) {
    s = db_->CompactRange(compact, handle, nullptr, nullptr);
    if (!s.ok()) {
      return FromRocksDb(s, absl::StrCat("compact ", handle->GetName()));
    }
  }
  report.disk_bytes_after = DiskBytes();
  return report;
}

absl::StatusOr<GcReport> RocksDbStateStore::CollectGarbage() {
  GcReport report;
  report.disk_bytes_before = DiskBytes();

  // References to records that do not exist (none should: they share the
  // records' batches; this repairs a store damaged by hand).
  {
    std::lock_guard<std::mutex> lock(document_mu_);
    std::vector<std::pair<std::string, RefKeyParts>> orphans;
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), refs_));
    std::vector<std::string> keys;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      keys.emplace_back(it->key().data(), it->key().size());
    }
    if (absl::Status s = FromRocksDb(it->status(), "scan refs"); !s.ok()) {
      return s;
    }
    for (const std::string& key : keys) {
      absl::StatusOr<RefKeyParts> parts = ParseRefKey(key);
      if (!parts.ok()) continue;  // Verify reports and repairs those
      std::string ignored;
      rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), documents_,
                                   ToSlice(parts->document_key), &ignored);
      if (!s.IsNotFound()) continue;
      std::string value;
      s = db_->Get(rocksdb::ReadOptions(), refs_, ToSlice(key), &value);
      absl::StatusOr<bool> pinned = DecodeRef(value);
      const KeySet state = {parts->state};
      StripeLocks locks = LockStripes(state);
      if (absl::Status d =
              FromRocksDb(db_->Delete(write_options_, refs_, ToSlice(key)),
                          "delete an orphaned ref");
          !d.ok()) {
        return d;
      }
      index_.AddRefs(parts->state, -1, pinned.ok() && *pinned ? -1 : 0);
      report.orphan_refs += 1;
    }
  }

  // Blocks no manifest names (a manifest replaced or removed by hand).
  const std::vector<StateKey> orphan_blocks = index_.OrphanBlocks();
  if (!orphan_blocks.empty()) {
    const KeySet keys(orphan_blocks.begin(), orphan_blocks.end());
    absl::StatusOr<Deleted> deleted = DeleteDurable(
        keys,
        [this](const StateKey& key) { return index_.ManifestRefs(key) > 0; },
        write_options_);
    if (!deleted.ok()) return deleted.status();
    report.orphan_blocks = deleted->blocks;
  }

  // Deleted and evicted states leave garbage in blob files until a
  // compaction rewrites them; force that for every blob file now.
  rocksdb::Status s = db_->Flush(rocksdb::FlushOptions(), states_);
  if (!s.ok()) return FromRocksDb(s, "flush states");
  rocksdb::CompactRangeOptions compact;
  compact.bottommost_level_compaction =
      rocksdb::BottommostLevelCompaction::kForce;
  compact.blob_garbage_collection_policy =
      rocksdb::BlobGarbageCollectionPolicy::kForce;
  compact.blob_garbage_collection_age_cutoff = 1.0;
  s = db_->CompactRange(compact, states_, nullptr, nullptr);
  if (!s.ok()) return FromRocksDb(s, "compact states");
  report.disk_bytes_after = DiskBytes();
  return report;
}

}  // namespace twice::storage
