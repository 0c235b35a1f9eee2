// Whole states of RocksDbStateStore: put, verified get, delete, and the
// locking and deletion machinery the other parts share.
#include <utility>

#include "absl/strings/str_cat.h"
#include "rocksdb/slice.h"
#include "storage/blob_envelope.h"
#include "storage/rocksdb_state_store.h"
#include "storage/rocksdb_status.h"
#include "storage/state_store_checks.h"

namespace twice::storage {
RocksDbStateStore::StripeLocks RocksDbStateStore::LockStripes(
    const KeySet& keys) {
  std::set<size_t> stripes;
  for (const StateKey& key : keys) stripes.insert(Stripe(key));
  StripeLocks locks;
  locks.reserve(stripes.size());
  for (size_t stripe : stripes) locks.emplace_back(state_locks_[stripe]);
  return locks;
}

RocksDbStateStore::KeySet RocksDbStateStore::OrphansIfRemoved(
    const KeySet& keys) const {
  return index_.OrphansIfRemoved(keys);
}

RocksDbStateStore::StripeLocks RocksDbStateStore::LockForDelete(
    const KeySet& keys, KeySet* orphans) {
  while (true) {
    KeySet all = keys;
    for (const StateKey& block : OrphansIfRemoved(keys)) all.insert(block);
    StripeLocks locks = LockStripes(all);
    // Block counts change only under their blocks' stripes; if a manifest
    // written meanwhile changed which blocks would be orphaned, retry.
    KeySet again = OrphansIfRemoved(keys);
    bool covered = true;
    for (const StateKey& block : again)
      covered = covered && all.contains(block);
    if (covered) {
      *orphans = std::move(again);
      return locks;
    }
  }
}

RocksDbStateStore::Deleted RocksDbStateStore::AppendDeletes(
    const KeySet& keys, const KeySet& orphans, rocksdb::WriteBatch& batch) {
  Deleted deleted;
  auto add = [&](const StateKey& key) {
    // Deleted even when the index does not know the key: a value left by a
    // failed write is garbage either way.
    batch.Delete(states_, ToSlice(key.Bytes())).PermitUncheckedError();
    batch.Delete(state_index_, ToSlice(key.Bytes())).PermitUncheckedError();
    std::optional<CachedState> state = index_.Find(key);
    if (!state.has_value()) return;
    deleted.bytes += state->stored_bytes;
    if (state->form == StateForm::kBlock) {
      deleted.blocks += 1;
    } else {
      deleted.states += 1;
    }
  };
  for (const StateKey& key : keys) add(key);
  for (const StateKey& key : orphans) add(key);
  return deleted;
}

void RocksDbStateStore::ForgetDeleted(const KeySet& keys,
                                      const KeySet& orphans) {
  for (const StateKey& key : keys) index_.Remove(key, nullptr);
  for (const StateKey& key : orphans) index_.Remove(key, nullptr);
}

absl::StatusOr<RocksDbStateStore::Deleted> RocksDbStateStore::DeleteDurable(
    const KeySet& keys, const std::function<bool(const StateKey&)>& keep,
    const rocksdb::WriteOptions& write_options) {
  KeySet orphans;
  StripeLocks locks = LockForDelete(keys, &orphans);
  KeySet doomed;
  for (const StateKey& key : keys) {
    if (!keep || !keep(key)) doomed.insert(key);
  }
  // Orphans of a subset are a subset of the orphans already locked.
  if (doomed.size() != keys.size()) orphans = OrphansIfRemoved(doomed);
  if (doomed.empty()) return Deleted{};
  rocksdb::WriteBatch batch;
  const Deleted deleted = AppendDeletes(doomed, orphans, batch);
  rocksdb::Status s = db_->Write(write_options, &batch);
  if (!s.ok()) {
    return FromRocksDb(s,
                       absl::StrCat("delete ", doomed.size(), " state(s) from ",
                                    doomed.begin()->Hex()));
  }
  ForgetDeleted(doomed, orphans);
  return deleted;
}

absl::StatusOr<RocksDbStateStore::StateRead> RocksDbStateStore::ReadState(
    const StateKey& key, bool copy_blob) {
  rocksdb::PinnableSlice value;
  rocksdb::Status s =
      db_->Get(state_read_options_, states_, ToSlice(key.Bytes()), &value);
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
  const std::string_view stored(value.data(), value.size());

  if (PeekEnvelopeKind(stored) == BlobKind::kBlockManifest) {
    absl::StatusOr<BlockManifest> manifest = DecodeManifest(stored);
    if (!manifest.ok()) {
      read.found = Found::kCorrupt;
      read.reason = std::string(manifest.status().message());
      return read;
    }
    read.found = Found::kGood;
    read.manifest = *std::move(manifest);
    return read;
  }
  absl::StatusOr<StateValue> decoded =
      copy_blob ? DecodeStateValueCopy(stored, &read.blob)
                : DecodeStateValue(stored);
  if (!decoded.ok()) {
    read.found = Found::kCorrupt;
    read.reason = std::string(decoded.status().message());
    return read;
  }
  read.found = Found::kGood;
  return read;
}

absl::StatusOr<RocksDbStateStore::StateRead> RocksDbStateStore::RemoveBadState(
    const StateKey& key) {
  // Look again under the key's lock before deleting: a concurrent put may
  // have just replaced the bad value with a good one. On a full disk the
  // bad value stays (every read verifies it again) rather than risk ENOSPC.
  if (!disk_.CheckDelete("delete a bad state").ok()) {
    return ReadState(key, true);
  }
  KeySet orphans;
  const KeySet keys = {key};
  StripeLocks locks = LockForDelete(keys, &orphans);
  absl::StatusOr<StateRead> read = ReadState(key, true);
  if (!read.ok() || read->found == Found::kGood ||
      read->found == Found::kMissing) {
    return read;
  }
  rocksdb::WriteBatch batch;
  AppendDeletes(keys, orphans, batch);
  if (absl::Status s = FromRocksDb(db_->Write(unsynced_write_options_, &batch),
                                   absl::StrCat("delete state ", key.Hex()));
      !s.ok()) {
    return s;
  }
  ForgetDeleted(keys, orphans);
  return read;
}

absl::Status RocksDbStateStore::PutState(const StateKey& key,
                                         std::string_view blob,
                                         const PutStateOptions& options) {
  if (absl::Status s = ValidatePutStateOptions(options); !s.ok()) return s;
  if (absl::Status s = disk_.CheckPut(absl::StrCat("write state ", key.Hex()),
                                      static_cast<int64_t>(blob.size()));
      !s.ok()) {
    return s;
  }
  const int64_t now = UnixMillisNow();
  // The value goes to RocksDB as three slices around the caller's blob, so
  // a multi-megabyte state is copied into the WriteBatch only.
  const StateValueEdges edges =
      EncodeStateValueEdges(blob, options.recompute_tokens, now);
  const rocksdb::Slice key_slice = ToSlice(key.Bytes());
  const rocksdb::Slice value_slices[] = {ToSlice(edges.head), ToSlice(blob),
                                         ToSlice(edges.tail)};
  const rocksdb::SliceParts key_parts(&key_slice, 1);
  const rocksdb::SliceParts value_parts(value_slices, 3);
  const std::string context = absl::StrCat("write state ", key.Hex());
  std::optional<CachedState> previous = index_.Find(key);
  if (previous.has_value() && previous->form != StateForm::kWhole) {
    // A chunked state (or a block) replaced by a whole one: drop it and the
    // blocks only it names first.
    absl::StatusOr<Deleted> dropped =
        DeleteDurable({key}, nullptr, unsynced_write_options_);
    if (!dropped.ok()) return dropped.status();
  }
  const int64_t bytes = edges.stored_bytes;
  if (absl::Status s = MakeRoom(bytes, {key}, options.tenant); !s.ok()) {
    return s;
  }

  const StateIndexEntry entry{.stored_bytes = bytes,
                              .recompute_tokens = options.recompute_tokens,
                              .written_unix_ms = now,
                              .flops_per_token = options.flops_per_token,
                              .form = StateForm::kWhole,
                              .tenant = options.tenant};
  absl::Status status;
  {
    StripeLocks locks = LockStripes({key});
    rocksdb::WriteBatch batch;
    rocksdb::Status s = batch.Put(states_, key_parts, value_parts);
    if (s.ok()) {
      s = batch.Put(state_index_, ToSlice(key.Bytes()),
                    ToSlice(EncodeStateIndex(entry)));
    }
    if (s.ok()) s = db_->Write(write_options_, &batch);
    status = FromRocksDb(s, context);
    if (status.ok()) {
      index_.Upsert(key,
                    CachedState{.stored_bytes = bytes,
                                .recompute_tokens = options.recompute_tokens,
                                .flops_per_token = options.flops_per_token,
                                .form = StateForm::kWhole,
                                .blocks = {},
                                .tenant = options.tenant});
    }
  }
  Unreserve(bytes, options.tenant);
  return status;
}

absl::StatusOr<std::string> RocksDbStateStore::GetState(const StateKey& key) {
  absl::StatusOr<StateRead> read = ReadState(key, true);
  if (!read.ok()) return read.status();
  if (read->found == Found::kGood && read->manifest.has_value()) {
    absl::StatusOr<std::vector<std::string>> blocks = GetStateBlocks(key);
    if (!blocks.ok()) return blocks.status();
    size_t total = 0;
    for (const std::string& block : *blocks) total += block.size();
    std::string assembled;
    assembled.reserve(total);
    for (const std::string& block : *blocks) assembled.append(block);
    return assembled;
  }
  if (read->found == Found::kCorrupt) {
    read = RemoveBadState(key);
    if (!read.ok()) return read.status();
    if (read->manifest.has_value()) return GetState(key);
  }

  switch (read->found) {
    case Found::kGood:
      hits_ += 1;
      index_.Touch(key);
      return std::move(read->blob);
    case Found::kMissing:
      misses_ += 1;
      return absl::NotFoundError(
          absl::StrCat("state ", key.Hex(), " not found"));
    case Found::kCorrupt:
      misses_ += 1;
      corruptions_ += 1;
      return absl::NotFoundError(absl::StrCat("state ", key.Hex(),
                                              " was corrupt (", read->reason,
                                              ") and has been deleted"));
  }
  return absl::InternalError("unreachable");
}

absl::StatusOr<bool> RocksDbStateStore::HasState(const StateKey& key) {
  // The index mirrors state_index, written in the same batch as the
  // values. A chunked state needs every block.
  std::optional<CachedState> state = index_.Find(key);
  if (!state.has_value() || state->form == StateForm::kBlock) return false;
  for (const StateKey& block : state->blocks) {
    if (!index_.Contains(block)) return false;
  }
  return true;
}

absl::Status RocksDbStateStore::DeleteState(const StateKey& key) {
  if (absl::Status s =
          disk_.CheckDelete(absl::StrCat("delete state ", key.Hex()));
      !s.ok()) {
    return s;
  }
  return DeleteDurable({key}, nullptr, write_options_).status();
}

absl::Status RocksDbStateStore::DiscardCorruptState(const StateKey& key) {
  if (absl::Status s = DeleteState(key); !s.ok()) return s;
  corruptions_ += 1;
  hits_ -= 1;
  misses_ += 1;
  return absl::OkStatus();
}

}  // namespace twice::storage
