#include "storage/rados/rados_state_store.h"

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "storage/blob_envelope.h"
#include "storage/block_manifest.h"
#include "storage/rados/rados_layout.h"
#include "storage/rados/rados_objects.h"
#include "storage/rados/rados_status.h"
#include "storage/state_store_checks.h"
#include "storage/state_value.h"

namespace twice::storage {
namespace {

using rados_layout::kBlockPrefix;
using rados_layout::kStatePrefix;

const char* FormName(StateForm form) {
  switch (form) {
    case StateForm::kWhole:
      return "whole";
    case StateForm::kManifest:
      return "manifest";
    case StateForm::kBlock:
      return "block";
  }
  return "whole";
}

ObjectAttributes IndexAttributes(StateForm form, const PutStateOptions& options,
                                 int64_t written_unix_ms) {
  return {{"twice.form", FormName(form)},
          {"twice.tenant", options.tenant},
          {"twice.recompute_tokens", std::to_string(options.recompute_tokens)},
          {"twice.written_unix_ms", std::to_string(written_unix_ms)}};
}

}  // namespace

std::string StateObjectName(const StateKey& key) {
  return kStatePrefix + key.Hex();
}
std::string BlockObjectName(const StateKey& key) {
  return kBlockPrefix + key.Hex();
}

absl::StatusOr<std::unique_ptr<RadosStateStore>> RadosStateStore::Open(
    RadosCluster& cluster, const std::string& pool, uint64_t part_bytes) {
  if (part_bytes == 0) {
    return absl::InvalidArgumentError("part_bytes must be positive");
  }
  absl::StatusOr<librados::IoCtx> io = cluster.OpenPool(pool, /*create=*/true);
  if (!io.ok()) return io.status();
  return std::unique_ptr<RadosStateStore>(
      new RadosStateStore(*std::move(io), part_bytes));
}

absl::Status RadosStateStore::PutState(const StateKey& key,
                                       std::string_view blob,
                                       const PutStateOptions& options) {
  if (absl::Status valid = ValidatePutStateOptions(options); !valid.ok())
    return valid;
  const int64_t written = UnixMillisNow();
  const std::string value =
      EncodeStateValue(blob, options.recompute_tokens, written);
  return PutStripedObject(pool_, StateObjectName(key), value,
                          IndexAttributes(StateForm::kWhole, options, written),
                          part_bytes_);
}

absl::Status RadosStateStore::Corrupt(const std::string& name,
                                      const absl::Status& why) {
  corruptions_.fetch_add(1);
  // Deleted so the next put of the key can write it again; a failed delete
  // only leaves the bad value to the next read (or the janitor's verify).
  (void)RemoveStripedObject(pool_, name);
  return absl::NotFoundError(
      absl::StrCat(name, " was corrupt and is deleted: ", why.message()));
}

absl::StatusOr<std::vector<std::string>> RadosStateStore::ReadBlocks(
    const StateKey& key) {
  const std::string name = StateObjectName(key);
  absl::StatusOr<ceph::bufferlist> read = ReadStripedObject(pool_, name);
  if (absl::IsDataLoss(read.status())) return Corrupt(name, read.status());
  if (!read.ok()) return read.status();
  // Decoded from librados' buffer: the blob is copied once, while verified.
  const std::string_view stored(read->c_str(), read->length());
  if (PeekEnvelopeKind(stored) != BlobKind::kBlockManifest) {
    std::string blob;
    absl::StatusOr<StateValue> value = DecodeStateValueCopy(stored, &blob);
    if (!value.ok()) return Corrupt(name, value.status());
    std::vector<std::string> one;
    one.push_back(std::move(blob));
    return one;
  }
  absl::StatusOr<BlockManifest> manifest = DecodeManifest(stored);
  if (!manifest.ok()) return Corrupt(name, manifest.status());
  std::vector<std::string> blocks;
  blocks.reserve(manifest->blocks.size());
  for (const BlockRef& ref : manifest->blocks) {
    const std::string block_name = BlockObjectName(ref.key);
    absl::StatusOr<ceph::bufferlist> block =
        ReadStripedObject(pool_, block_name);
    if (absl::IsNotFound(block.status()) || absl::IsDataLoss(block.status())) {
      // A lost block makes the state a miss; the manifest is of no use.
      return Corrupt(name, block.status());
    }
    if (!block.ok()) return block.status();
    std::string blob;
    absl::StatusOr<StateValue> value = DecodeStateValueCopy(
        std::string_view(block->c_str(), block->length()), &blob);
    if (!value.ok()) {
      (void)Corrupt(block_name, value.status());
      return Corrupt(name, value.status());
    }
    // The manifest pins the exact bytes: a block replaced under its name
    // is caught even with an intact envelope of its own.
    if (static_cast<int64_t>(blob.size()) != ref.bytes ||
        BlockChecksum(blob) != ref.checksum) {
      return Corrupt(name, absl::DataLossError(absl::StrCat(
                               "block ", block_name,
                               " is not the one the manifest names")));
    }
    blocks.push_back(std::move(blob));
  }
  return blocks;
}

void RadosStateStore::CountRead(const absl::Status& status) {
  if (status.ok()) {
    hits_.fetch_add(1);
  } else if (absl::IsNotFound(status)) {
    misses_.fetch_add(1);
  }
}

absl::StatusOr<std::string> RadosStateStore::GetState(const StateKey& key) {
  absl::StatusOr<std::vector<std::string>> blocks = ReadBlocks(key);
  CountRead(blocks.status());
  if (!blocks.ok()) return blocks.status();
  if (blocks->size() == 1) return std::move(blocks->front());
  std::string whole;
  size_t total = 0;
  for (const std::string& block : *blocks) total += block.size();
  whole.reserve(total);
  for (const std::string& block : *blocks) whole += block;
  return whole;
}

absl::StatusOr<std::vector<std::string>> RadosStateStore::GetStateBlocks(
    const StateKey& key) {
  absl::StatusOr<std::vector<std::string>> blocks = ReadBlocks(key);
  CountRead(blocks.status());
  return blocks;
}

absl::StatusOr<bool> RadosStateStore::HasState(const StateKey& key) {
  absl::StatusOr<std::optional<uint64_t>> size =
      StatObject(pool_, StateObjectName(key));
  if (!size.ok()) return size.status();
  return size->has_value();
}

absl::Status RadosStateStore::DeleteState(const StateKey& key) {
  return RemoveStripedObject(pool_, StateObjectName(key));
}

absl::Status RadosStateStore::DiscardCorruptState(const StateKey& key) {
  corruptions_.fetch_add(1);
  return RemoveStripedObject(pool_, StateObjectName(key));
}

absl::Status RadosStateStore::PutStateBlocks(
    const StateKey& key, const std::optional<StateKey>& base,
    absl::Span<const std::string_view> new_blocks,
    const PutStateOptions& options) {
  if (absl::Status valid = ValidatePutStateOptions(options); !valid.ok())
    return valid;
  if (base.has_value() && *base == key) {
    return absl::InvalidArgumentError("a chunked state cannot extend itself");
  }
  BlockManifest manifest;
  manifest.recompute_tokens = options.recompute_tokens;
  manifest.written_unix_ms = UnixMillisNow();
  if (base.has_value()) {
    absl::StatusOr<std::string> stored =
        ReadObject(pool_, StateObjectName(*base));
    if (!stored.ok()) return stored.status();
    absl::StatusOr<BlockManifest> base_manifest = DecodeManifest(*stored);
    if (!base_manifest.ok()) {
      return absl::NotFoundError(absl::StrCat(
          "base state ", base->Hex(), " is not stored as a chunked state"));
    }
    manifest.blocks = std::move(base_manifest->blocks);
  }
  const size_t base_count = manifest.blocks.size();
  // Blocks first: the manifest is written only once every block it names
  // is acknowledged.
  for (size_t i = 0; i < new_blocks.size(); ++i) {
    const StateKey block_key = BlockKey(key, base_count + i);
    const std::string value = EncodeStateValue(
        new_blocks[i], options.recompute_tokens, manifest.written_unix_ms);
    if (absl::Status put =
            PutStripedObject(pool_, BlockObjectName(block_key), value,
                             IndexAttributes(StateForm::kBlock, options,
                                             manifest.written_unix_ms),
                             part_bytes_);
        !put.ok()) {
      return put;
    }
    manifest.blocks.push_back({block_key,
                               static_cast<int64_t>(new_blocks[i].size()),
                               BlockChecksum(new_blocks[i])});
  }
  return PutImmutableObject(
      pool_, StateObjectName(key), EncodeManifest(manifest),
      IndexAttributes(StateForm::kManifest, options, manifest.written_unix_ms));
}

absl::StatusOr<StatePage> RadosStateStore::ListStates(
    int page_size, std::string_view page_token) {
  absl::StatusOr<int> size = StatePageSize(page_size);
  if (!size.ok()) return size.status();
  page_size = *size;
  librados::ObjectCursor cursor = pool_.object_list_begin();
  if (!page_token.empty() &&
      !cursor.from_str(std::string(page_token.data(), page_token.size()))) {
    return absl::InvalidArgumentError(
        "page_token is not one a ListStates page returned");
  }
  const librados::ObjectCursor end = pool_.object_list_end();
  StatePage page;
  while (!pool_.object_list_is_end(cursor) &&
         static_cast<int>(page.states.size()) < page_size) {
    std::vector<librados::ObjectItem> items;
    librados::ObjectCursor next;
    const size_t wanted = static_cast<size_t>(page_size) - page.states.size();
    const int r = pool_.object_list(cursor, end, wanted, {}, &items, &next);
    if (r < 0) return FromRados(r, "listing the states pool");
    for (const librados::ObjectItem& item : items) {
      if (!absl::StartsWith(item.oid, kStatePrefix)) continue;
      absl::StatusOr<StateKey> key =
          StateKey::FromHex(std::string_view(item.oid).substr(2));
      if (!key.ok()) continue;  // not an object of this store
      absl::StatusOr<ObjectAttributes> attributes =
          ReadAttributes(pool_, item.oid);
      if (absl::IsNotFound(attributes.status())) continue;  // deleted since
      if (!attributes.ok()) return attributes.status();
      absl::StatusOr<std::optional<uint64_t>> size =
          StatObject(pool_, item.oid);
      if (!size.ok()) return size.status();
      if (!size->has_value()) continue;
      int64_t written = 0;
      if (!absl::SimpleAtoi((*attributes)["twice.written_unix_ms"], &written)) {
        written = 0;  // an object written before the field existed
      }
      page.states.push_back(
          {.key = *key,
           .stored_bytes = static_cast<int64_t>(**size),
           .chunked = (*attributes)["twice.form"] == "manifest",
           .tenant = (*attributes)["twice.tenant"],
           .written_unix_ms = written});
    }
    cursor = next;
  }
  if (!pool_.object_list_is_end(cursor)) {
    page.next_page_token = cursor.to_str();
  }
  return page;
}

}  // namespace twice::storage
