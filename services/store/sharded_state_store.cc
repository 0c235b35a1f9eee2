#include "services/store/sharded_state_store.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "storage/state_store_checks.h"

namespace twice::services {
namespace {

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t Fnv1a(uint64_t hash, std::string_view bytes) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= kFnvPrime;
  }
  return hash;
}

// splitmix64's finaliser: spreads FNV's weak low bits over the word.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

std::string DocumentItem(std::string_view tenant,
                         std::string_view document_id) {
  // The length prefix keeps ("a", "bc") and ("ab", "c") apart.
  return absl::StrCat(tenant.size(), ":", std::string(tenant), "/",
                      std::string(document_id));
}

}  // namespace

uint64_t RendezvousWeight(std::string_view shard, std::string_view item) {
  uint64_t h = Fnv1a(kFnvOffset, shard);
  h = Fnv1a(h, std::string_view("\0", 1));
  return Mix(Fnv1a(h, item));
}

absl::StatusOr<std::unique_ptr<ShardedStateStore>> ShardedStateStore::Create(
    std::vector<StoreShard> shards) {
  if (shards.empty()) {
    return absl::InvalidArgumentError("a sharded store needs a shard");
  }
  std::set<std::string> names;
  for (const StoreShard& shard : shards) {
    if (shard.store == nullptr) {
      return absl::InvalidArgumentError("a store shard is null");
    }
    if (!names.insert(shard.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("store shard '", shard.name, "' is named twice"));
    }
  }
  return std::unique_ptr<ShardedStateStore>(
      new ShardedStateStore(std::move(shards)));
}

size_t ShardedStateStore::OwnerOf(std::string_view tenant,
                                  std::string_view document_id) const {
  const std::string item = DocumentItem(tenant, document_id);
  size_t best = 0;
  uint64_t best_weight = 0;
  for (size_t i = 0; i < shards_.size(); ++i) {
    const uint64_t w = RendezvousWeight(shards_[i].name, item);
    if (i == 0 || w > best_weight) {
      best = i;
      best_weight = w;
    }
  }
  return best;
}

size_t ShardedStateStore::OwnerOfKey(const storage::StateKey& key) const {
  size_t best = 0;
  uint64_t best_weight = 0;
  for (size_t i = 0; i < shards_.size(); ++i) {
    const uint64_t w = RendezvousWeight(shards_[i].name, key.Bytes());
    if (i == 0 || w > best_weight) {
      best = i;
      best_weight = w;
    }
  }
  return best;
}

std::vector<size_t> ShardedStateStore::ReadOrder(
    const storage::StateKey& key) const {
  const size_t owner = OwnerOfKey(key);
  std::vector<size_t> order = {owner};
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (i != owner) order.push_back(i);
  }
  return order;
}

storage::Store* ShardedStateStore::ForDocument(
    const storage::DocumentRef& document) {
  if (document.document_id.empty()) return this;
  return shards_[OwnerOf(document.tenant, document.document_id)].store.get();
}

absl::Status ShardedStateStore::PutState(
    const storage::StateKey& key, std::string_view blob,
    const storage::PutStateOptions& options) {
  return shards_[OwnerOfKey(key)].store->PutState(key, blob, options);
}

absl::StatusOr<std::string> ShardedStateStore::GetState(
    const storage::StateKey& key) {
  absl::Status last =
      absl::NotFoundError(absl::StrCat("state ", key.Hex(), " not found"));
  for (size_t i : ReadOrder(key)) {
    absl::StatusOr<std::string> blob = shards_[i].store->GetState(key);
    if (blob.ok() || blob.status().code() != absl::StatusCode::kNotFound) {
      return blob;
    }
    last = blob.status();
  }
  return last;
}

absl::StatusOr<bool> ShardedStateStore::HasState(const storage::StateKey& key) {
  for (size_t i : ReadOrder(key)) {
    absl::StatusOr<bool> has = shards_[i].store->HasState(key);
    if (!has.ok() || *has) return has;
  }
  return false;
}

absl::Status ShardedStateStore::DeleteState(const storage::StateKey& key) {
  absl::Status result;
  for (StoreShard& shard : shards_) {
    absl::Status s = shard.store->DeleteState(key);
    if (!s.ok() && s.code() != absl::StatusCode::kNotFound) result = s;
  }
  return result;
}

absl::Status ShardedStateStore::DiscardCorruptState(
    const storage::StateKey& key) {
  // Only a replica that holds the state counts the corruption.
  for (size_t i : ReadOrder(key)) {
    absl::StatusOr<bool> has = shards_[i].store->HasState(key);
    if (has.ok() && *has) {
      return shards_[i].store->DiscardCorruptState(key);
    }
  }
  return absl::OkStatus();
}

absl::Status ShardedStateStore::PutStateBlocks(
    const storage::StateKey& key, const std::optional<storage::StateKey>& base,
    absl::Span<const std::string_view> new_blocks,
    const storage::PutStateOptions& options) {
  return shards_[OwnerOfKey(key)].store->PutStateBlocks(key, base, new_blocks,
                                                        options);
}

absl::StatusOr<std::vector<std::string>> ShardedStateStore::GetStateBlocks(
    const storage::StateKey& key) {
  absl::Status last =
      absl::NotFoundError(absl::StrCat("state ", key.Hex(), " not found"));
  for (size_t i : ReadOrder(key)) {
    absl::StatusOr<std::vector<std::string>> blocks =
        shards_[i].store->GetStateBlocks(key);
    if (blocks.ok() || blocks.status().code() != absl::StatusCode::kNotFound) {
      return blocks;
    }
    last = blocks.status();
  }
  return last;
}

absl::Status ShardedStateStore::PutDocument(
    const storage::DocumentRecord& record, absl::Span<const int32_t> tokens) {
  return ForDocument(storage::RefOf(record))->PutDocument(record, tokens);
}

absl::Status ShardedStateStore::UpdateDocument(
    const storage::DocumentRecord& record) {
  return ForDocument(storage::RefOf(record))->UpdateDocument(record);
}

absl::StatusOr<storage::DocumentRecord> ShardedStateStore::GetDocument(
    const storage::DocumentRef& document) {
  if (document.document_id.empty()) {
    return absl::InvalidArgumentError("document id is empty");
  }
  return ForDocument(document)->GetDocument(document);
}

absl::StatusOr<std::vector<int32_t>> ShardedStateStore::GetTokens(
    const storage::DocumentRef& document) {
  if (document.document_id.empty()) {
    return absl::InvalidArgumentError("document id is empty");
  }
  return ForDocument(document)->GetTokens(document);
}

absl::StatusOr<storage::DocumentPage> ShardedStateStore::ListDocuments(
    std::string_view tenant, int page_size, std::string_view page_token) {
  if (page_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size must be non-negative, got ", page_size));
  }
  const int want = page_size == 0 ? 100 : page_size;
  // Each replica returns its first `want` documents after the token (ids
  // are unique across replicas: a document has one owner); the merged page
  // is the first `want` of their union.
  std::vector<storage::DocumentRecord> merged;
  bool more = false;
  for (StoreShard& shard : shards_) {
    absl::StatusOr<storage::DocumentPage> page =
        shard.store->ListDocuments(tenant, want, page_token);
    if (!page.ok()) return page.status();
    more = more || !page->next_page_token.empty();
    for (storage::DocumentRecord& r : page->records) {
      merged.push_back(std::move(r));
    }
  }
  std::sort(
      merged.begin(), merged.end(),
      [](const storage::DocumentRecord& a, const storage::DocumentRecord& b) {
        return a.document_id < b.document_id;
      });
  storage::DocumentPage result;
  if (static_cast<int>(merged.size()) > want) {
    merged.resize(static_cast<size_t>(want));
    more = true;
  }
  result.records = std::move(merged);
  if (more && !result.records.empty()) {
    result.next_page_token = result.records.back().document_id;
  }
  return result;
}

absl::StatusOr<int64_t> ShardedStateStore::DeleteDocument(
    const storage::DocumentRef& document) {
  return ForDocument(document)->DeleteDocument(document);
}

void ShardedStateStore::RecordRecompute() { recomputes_.fetch_add(1); }

storage::StoreStats ShardedStateStore::Stats() {
  storage::StoreStats total;
  for (StoreShard& shard : shards_) {
    const storage::StoreStats s = shard.store->Stats();
    total.state_bytes += s.state_bytes;
    total.state_count += s.state_count;
    total.document_count += s.document_count;
    total.hits += s.hits;
    total.misses += s.misses;
    total.evictions += s.evictions;
    total.corruptions += s.corruptions;
    total.recomputes += s.recomputes;
    total.budget_bytes += s.budget_bytes;
    total.evicted_bytes += s.evicted_bytes;
    total.block_count += s.block_count;
    total.pinned_state_count += s.pinned_state_count;
    total.disk_bytes += s.disk_bytes;
    total.catalog_corruptions += s.catalog_corruptions;
  }
  total.recomputes += recomputes_.load();
  return total;
}

absl::StatusOr<storage::VerifyReport> ShardedStateStore::Verify(
    const storage::VerifyOptions& options) {
  storage::VerifyReport total;
  for (StoreShard& shard : shards_) {
    absl::StatusOr<storage::VerifyReport> r = shard.store->Verify(options);
    if (!r.ok()) return r.status();
    total.states_checked += r->states_checked;
    total.documents_checked += r->documents_checked;
    total.refs_checked += r->refs_checked;
    total.bytes_checked += r->bytes_checked;
    total.repaired += r->repaired;
    for (storage::BadValue& bad : r->bad) {
      bad.key = absl::StrCat(shard.name, ":", bad.key);
      total.bad.push_back(std::move(bad));
    }
  }
  return total;
}

absl::StatusOr<storage::CompactReport> ShardedStateStore::Compact() {
  storage::CompactReport total;
  for (StoreShard& shard : shards_) {
    absl::StatusOr<storage::CompactReport> r = shard.store->Compact();
    if (!r.ok()) return r.status();
    total.disk_bytes_before += r->disk_bytes_before;
    total.disk_bytes_after += r->disk_bytes_after;
  }
  return total;
}

absl::StatusOr<storage::GcReport> ShardedStateStore::CollectGarbage() {
  storage::GcReport total;
  for (StoreShard& shard : shards_) {
    absl::StatusOr<storage::GcReport> r = shard.store->CollectGarbage();
    if (!r.ok()) return r.status();
    total.orphan_refs += r->orphan_refs;
    total.orphan_blocks += r->orphan_blocks;
    total.disk_bytes_before += r->disk_bytes_before;
    total.disk_bytes_after += r->disk_bytes_after;
  }
  return total;
}

absl::StatusOr<storage::BackupReport> ShardedStateStore::Backup(
    const std::string& dir) {
  storage::BackupReport total;
  std::vector<std::string> paths;
  for (StoreShard& shard : shards_) {
    absl::StatusOr<storage::BackupReport> r = shard.store->Backup(dir);
    if (!r.ok()) {
      return absl::Status(r.status().code(),
                          absl::StrCat("backup of store replica ", shard.name,
                                       ": ", r.status().message()));
    }
    paths.push_back(absl::StrCat(shard.name, "=", r->path));
    total.files += r->files;
    total.bytes += r->bytes;
    total.document_count += r->document_count;
    total.state_count += r->state_count;
  }
  total.path = absl::StrJoin(paths, ",");
  return total;
}

absl::StatusOr<storage::StatePage> ShardedStateStore::ListStates(
    int page_size, std::string_view page_token) {
  absl::StatusOr<int> size = storage::StatePageSize(page_size);
  if (!size.ok()) return size.status();
  const size_t wanted = static_cast<size_t>(*size);
  size_t shard = 0;
  std::string_view inner;
  if (!page_token.empty()) {
    const size_t colon = page_token.find(':');
    if (colon == std::string_view::npos ||
        !absl::SimpleAtoi(absl::string_view(page_token.data(), colon),
                          &shard) ||
        shard >= shards_.size()) {
      return absl::InvalidArgumentError(
          "page_token is not one a ListStates page returned");
    }
    inner = page_token.substr(colon + 1);
  }
  storage::StatePage out;
  for (; shard < shards_.size(); ++shard, inner = {}) {
    absl::StatusOr<storage::StatePage> page = shards_[shard].store->ListStates(
        static_cast<int>(wanted - out.states.size()), inner);
    if (!page.ok()) return page.status();
    for (storage::StateListing& state : page->states) {
      out.states.push_back(std::move(state));
    }
    if (!page->next_page_token.empty()) {
      out.next_page_token = absl::StrCat(shard, ":", page->next_page_token);
      return out;
    }
    if (out.states.size() == wanted) {
      if (shard + 1 < shards_.size()) {
        out.next_page_token = absl::StrCat(shard + 1, ":");
      }
      return out;
    }
  }
  return out;
}

}  // namespace twice::services
