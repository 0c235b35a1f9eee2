// Chunked states of RocksDbStateStore (block_manifest.h has the layout).
#include <utility>

#include "absl/strings/str_cat.h"
#include "rocksdb/slice.h"
#include "storage/rocksdb_state_store.h"
#include "storage/rocksdb_status.h"
#include "storage/state_store_checks.h"

namespace twice::storage {
absl::Status RocksDbStateStore::PutStateBlocks(
    const StateKey& key, const std::optional<StateKey>& base,
    absl::Span<const std::string_view> new_blocks,
    const PutStateOptions& options) {
  int64_t block_bytes = 0;
  for (std::string_view block : new_blocks) {
    block_bytes += static_cast<int64_t>(block.size());
  }
  if (absl::Status s = disk_.CheckPut(
          absl::StrCat("write chunked state ", key.Hex()), block_bytes);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidatePutStateOptions(options); !s.ok()) return s;
  if (base.has_value() && *base == key) {
    return absl::InvalidArgumentError("a chunked state cannot extend itself");
  }
  BlockManifest manifest;
  manifest.recompute_tokens = options.recompute_tokens;
  manifest.written_unix_ms = UnixMillisNow();
  if (base.has_value()) {
    absl::StatusOr<StateRead> read = ReadState(*base, false);
    if (!read.ok()) return read.status();
    if (read->found != Found::kGood || !read->manifest.has_value()) {
      return absl::NotFoundError(absl::StrCat(
          "base state ", base->Hex(), " is not stored as a chunked state"));
    }
    manifest.blocks = std::move(read->manifest->blocks);
  }
  const size_t base_count = manifest.blocks.size();

  std::vector<std::string> values;
  values.reserve(new_blocks.size());
  int64_t incoming = 0;
  for (size_t i = 0; i < new_blocks.size(); ++i) {
    const StateKey block_key = BlockKey(key, base_count + i);
    values.push_back(EncodeStateValue(new_blocks[i], options.recompute_tokens,
                                      manifest.written_unix_ms));
    incoming += static_cast<int64_t>(values.back().size());
    manifest.blocks.push_back({block_key,
                               static_cast<int64_t>(new_blocks[i].size()),
                               BlockChecksum(new_blocks[i])});
  }
  const std::string manifest_value = EncodeManifest(manifest);
  incoming += static_cast<int64_t>(manifest_value.size());

  std::optional<CachedState> previous = index_.Find(key);
  if (previous.has_value() && previous->form != StateForm::kManifest) {
    absl::StatusOr<Deleted> dropped =
        DeleteDurable({key}, nullptr, unsynced_write_options_);
    if (!dropped.ok()) return dropped.status();
  }
  KeySet exclude = {key};
  if (base.has_value()) exclude.insert(*base);
  if (absl::Status s = MakeRoom(incoming, exclude, options.tenant); !s.ok()) {
    return s;
  }

  KeySet listed;
  for (const BlockRef& block : manifest.blocks) listed.insert(block.key);
  // Lock the manifest, every block it lists (so none of the base's can be
  // evicted between the check below and the commit) and the blocks a
  // replaced manifest leaves behind.
  StripeLocks locks;
  KeySet orphans;
  while (true) {
    KeySet all = listed;
    all.insert(key);
    for (const StateKey& block : OrphansIfRemoved({key})) all.insert(block);
    locks = LockStripes(all);
    orphans = OrphansIfRemoved({key});
    bool covered = true;
    for (const StateKey& block : orphans)
      covered = covered && all.contains(block);
    if (covered) break;
    locks.clear();
  }
  for (size_t i = 0; i < base_count; ++i) {
    if (!index_.Contains(manifest.blocks[i].key)) {
      locks.clear();
      Unreserve(incoming, options.tenant);
      return absl::NotFoundError(absl::StrCat(
          "base state ", base->Hex(), " lost block ", i, "; write it whole"));
    }
  }

  rocksdb::WriteBatch batch;
  rocksdb::Status s;
  for (size_t i = 0; i < values.size() && s.ok(); ++i) {
    const BlockRef& block = manifest.blocks[base_count + i];
    const StateIndexEntry entry{
        .stored_bytes = static_cast<int64_t>(values[i].size()),
        .recompute_tokens = options.recompute_tokens,
        .written_unix_ms = manifest.written_unix_ms,
        .flops_per_token = options.flops_per_token,
        .form = StateForm::kBlock,
        .tenant = options.tenant};
    s = batch.Put(states_, ToSlice(block.key.Bytes()), ToSlice(values[i]));
    if (s.ok()) {
      s = batch.Put(state_index_, ToSlice(block.key.Bytes()),
                    ToSlice(EncodeStateIndex(entry)));
    }
  }
  const StateIndexEntry manifest_entry{
      .stored_bytes = static_cast<int64_t>(manifest_value.size()),
      .recompute_tokens = options.recompute_tokens,
      .written_unix_ms = manifest.written_unix_ms,
      .flops_per_token = options.flops_per_token,
      .form = StateForm::kManifest,
      .tenant = options.tenant};
  if (s.ok()) {
    s = batch.Put(states_, ToSlice(key.Bytes()), ToSlice(manifest_value));
  }
  if (s.ok()) {
    s = batch.Put(state_index_, ToSlice(key.Bytes()),
                  ToSlice(EncodeStateIndex(manifest_entry)));
  }
  KeySet dropped;
  for (const StateKey& block : orphans) {
    if (listed.contains(block)) continue;
    dropped.insert(block);
    if (s.ok()) s = batch.Delete(states_, ToSlice(block.Bytes()));
    if (s.ok()) s = batch.Delete(state_index_, ToSlice(block.Bytes()));
  }
  if (s.ok()) s = db_->Write(write_options_, &batch);
  absl::Status status =
      FromRocksDb(s, absl::StrCat("write chunked state ", key.Hex()));
  if (status.ok()) {
    for (size_t i = 0; i < values.size(); ++i) {
      index_.Upsert(
          manifest.blocks[base_count + i].key,
          CachedState{.stored_bytes = static_cast<int64_t>(values[i].size()),
                      .recompute_tokens = options.recompute_tokens,
                      .flops_per_token = options.flops_per_token,
                      .form = StateForm::kBlock,
                      .blocks = {},
                      .tenant = options.tenant});
    }
    CachedState state{.stored_bytes = manifest_entry.stored_bytes,
                      .recompute_tokens = options.recompute_tokens,
                      .flops_per_token = options.flops_per_token,
                      .form = StateForm::kManifest,
                      .blocks = {},
                      .tenant = options.tenant};
    for (const BlockRef& block : manifest.blocks)
      state.blocks.push_back(block.key);
    index_.Upsert(key, state);
    for (const StateKey& block : dropped) index_.Remove(block, nullptr);
  }
  locks.clear();
  Unreserve(incoming, options.tenant);
  return status;
}

absl::StatusOr<std::vector<std::string>> RocksDbStateStore::GetStateBlocks(
    const StateKey& key) {
  absl::StatusOr<StateRead> read = ReadState(key, true);
  if (!read.ok()) return read.status();
  if (read->found == Found::kCorrupt) {
    read = RemoveBadState(key);
    if (!read.ok()) return read.status();
    if (read->found == Found::kCorrupt) {
      misses_ += 1;
      corruptions_ += 1;
      return absl::NotFoundError(absl::StrCat("state ", key.Hex(),
                                              " was corrupt (", read->reason,
                                              ") and has been deleted"));
    }
  }
  if (read->found != Found::kGood) {
    misses_ += 1;
    return absl::NotFoundError(absl::StrCat("state ", key.Hex(), " not found"));
  }
  if (!read->manifest.has_value()) {
    hits_ += 1;
    index_.Touch(key);
    std::vector<std::string> whole;
    whole.push_back(std::move(read->blob));
    return whole;
  }

  std::vector<std::string> blocks;
  blocks.reserve(read->manifest->blocks.size());
  for (size_t i = 0; i < read->manifest->blocks.size(); ++i) {
    const BlockRef& ref = read->manifest->blocks[i];
    absl::StatusOr<StateRead> block = ReadState(ref.key, true);
    if (!block.ok()) return block.status();
    std::string reason;
    bool corrupt = false;
    if (block->found == Found::kMissing) {
      reason = "is missing";
    } else if (block->found != Found::kGood || block->manifest.has_value()) {
      reason = absl::StrCat("is corrupt (", block->reason, ")");
      corrupt = true;
    } else if (static_cast<int64_t>(block->blob.size()) != ref.bytes ||
               BlockChecksum(block->blob) != ref.checksum) {
      reason = "does not match the manifest's size or checksum";
      corrupt = true;
    }
    if (reason.empty()) {
      blocks.push_back(std::move(block->blob));
      continue;
    }
    // The state cannot be served whole: it goes (with the bad block), and
    // other states sharing that block find it missing on their next read.
    KeySet doomed = {key};
    if (corrupt) doomed.insert(ref.key);
    absl::StatusOr<Deleted> deleted =
        DeleteDurable(doomed, nullptr, unsynced_write_options_);
    if (!deleted.ok()) return deleted.status();
    misses_ += 1;
    if (corrupt) corruptions_ += 1;
    return absl::NotFoundError(absl::StrCat("state ", key.Hex(), ": block ", i,
                                            " ", reason,
                                            "; the state has been deleted"));
  }
  hits_ += 1;
  index_.Touch(key);
  return blocks;
}

}  // namespace twice::storage
