#include "storage/rados/rados_janitor.h"

#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "storage/block_manifest.h"
#include "storage/rados/rados_layout.h"
#include "storage/rados/rados_objects.h"
#include "storage/rados/rados_status.h"
#include "storage/state_cache_index.h"
#include "storage/state_value.h"

namespace twice::storage {
namespace {

using namespace rados_layout;  // NOLINT: the layout's names, read here only

constexpr char kLockName[] = "twice.janitor";
// Deletions between two renewals of the lease.
constexpr int kDeletesPerRenewal = 200;

int64_t AttributeInt(const ObjectAttributes& attributes, const char* name) {
  auto it = attributes.find(name);
  int64_t value = 0;
  if (it == attributes.end() || !absl::SimpleAtoi(it->second, &value)) {
    return 0;  // absent: written before the field existed, counts as old
  }
  return value;
}

std::string RandomCookie() {
  std::mt19937_64 rng{std::random_device{}()};
  return absl::StrCat(absl::Hex(rng()), absl::Hex(rng()));
}

}  // namespace

// What a pass reads before it changes anything.
struct RadosJanitor::Scan {
  struct StoredState {
    int64_t bytes = 0;
    int64_t recompute_tokens = 0;
    int64_t written_unix_ms = 0;
    bool manifest = false;
    std::string tenant;
    std::vector<StateKey> blocks;
  };
  struct StoredObject {
    int64_t bytes = 0;
    int64_t written_unix_ms = 0;
  };
  // States some record names, and whether a pinned one does.
  std::unordered_map<StateKey, bool, StateKeyHash> named;
  std::unordered_set<std::string> named_tokens;
  std::unordered_set<std::string> tenants;
  std::vector<DocumentRef> documents;
  std::unordered_map<StateKey, StoredState, StateKeyHash> states;
  std::unordered_map<StateKey, StoredObject, StateKeyHash> blocks;
  // Parts of striped values (rados_objects.h) by the name of their head.
  std::unordered_map<std::string,
                     std::vector<std::pair<std::string, StoredObject>>>
      parts;
  std::unordered_map<std::string, StoredObject> tokens_objects;
  // Parts of striped tokens objects (meta pool), by part name: their head.
  std::unordered_map<std::string, std::pair<std::string, StoredObject>>
      tokens_parts;
};

absl::StatusOr<std::unique_ptr<RadosJanitor>> RadosJanitor::Open(
    const RadosStoreOptions& store, const JanitorOptions& options) {
  if (options.lease.count() <= 0) {
    return absl::InvalidArgumentError("the janitor's lease must be positive");
  }
  if (options.grace.count() < 0 || options.state_budget_bytes < 0 ||
      !(options.eviction_cost_weight >= 0)) {
    return absl::InvalidArgumentError(
        "the janitor's grace, budget and cost weight must be non-negative");
  }
  absl::StatusOr<std::unique_ptr<RadosCluster>> cluster =
      RadosCluster::Connect(store.cluster);
  if (!cluster.ok()) return cluster.status();
  std::unique_ptr<RadosJanitor> janitor(
      new RadosJanitor(*std::move(cluster), options));
  absl::StatusOr<librados::IoCtx> meta =
      janitor->cluster_->OpenPool(RadosMetaPool(store), /*create=*/true);
  if (!meta.ok()) return meta.status();
  janitor->meta_ = *std::move(meta);
  absl::StatusOr<librados::IoCtx> states =
      janitor->cluster_->OpenPool(RadosStatesPool(store), /*create=*/true);
  if (!states.ok()) return states.status();
  janitor->states_pool_ = *std::move(states);
  absl::StatusOr<std::unique_ptr<RadosStateStore>> state_store =
      RadosStateStore::Open(*janitor->cluster_, RadosStatesPool(store));
  if (!state_store.ok()) return state_store.status();
  janitor->states_ = *std::move(state_store);
  absl::StatusOr<std::unique_ptr<RadosDocumentCatalog>> catalog =
      RadosDocumentCatalog::Open(*janitor->cluster_, RadosMetaPool(store),
                                 *janitor->states_);
  if (!catalog.ok()) return catalog.status();
  janitor->catalog_ = *std::move(catalog);
  janitor->cookie_ = RandomCookie();
  return janitor;
}

RadosJanitor::~RadosJanitor() {
  // The next janitor need not wait out the lease.
  if (active_) (void)meta_.unlock(kJanitorLock, kLockName, cookie_);
}

absl::StatusOr<bool> RadosJanitor::Acquire() {
  timeval duration{};
  duration.tv_sec = options_.lease.count();
  const int r =
      meta_.lock_exclusive(kJanitorLock, kLockName, cookie_, "twice janitor",
                           &duration, LIBRADOS_LOCK_FLAG_MAY_RENEW);
  if (r == -EBUSY || r == -EEXIST) {
    active_ = false;
    return false;
  }
  if (r < 0) return FromRados(r, "taking the janitor's lock");
  active_ = true;
  return true;
}

absl::Status RadosJanitor::StillActive() {
  absl::StatusOr<bool> held = Acquire();
  if (!held.ok()) return held.status();
  if (!*held) {
    return absl::AbortedError(
        "the janitor's lease was lost (another janitor holds it); the pass "
        "stops");
  }
  return absl::OkStatus();
}

absl::Status RadosJanitor::ScanIndex(Scan& scan) {
  return ForEachObject(meta_, kIndexPrefix, [&](const std::string& object) {
    absl::StatusOr<ObjectAttributes> attributes = ReadAttributes(meta_, object);
    if (absl::IsNotFound(attributes.status())) return absl::OkStatus();
    if (!attributes.ok()) return attributes.status();
    const std::string tenant = (*attributes)[kTenantAttribute];
    scan.tenants.insert(tenant);
    return ForEachOmapEntry(
        meta_, object, "",
        [&](const std::string& key, const ceph::bufferlist& value) {
          if (absl::StartsWith(key, kRecordKey)) {
            scan.documents.push_back({tenant, key.substr(2)});
          } else if (absl::StartsWith(key, kTokensKey)) {
            scan.named_tokens.insert(value.to_str());
          } else if (absl::StartsWith(key, kRefKey)) {
            absl::StatusOr<StateKey> state = StateKey::FromHex(
                std::string_view(key).substr(2, kStateHexDigits));
            if (state.ok()) {
              bool& pinned = scan.named[*state];
              // An unreadable flag counts as pinned, the side that loses
              // nothing.
              pinned = pinned || value.to_str() != "0";
            }
          }
          return absl::OkStatus();
        });
  });
}

absl::Status RadosJanitor::ScanStates(Scan& scan) {
  absl::Status states = ForEachObject(
      states_pool_, "", [&](const std::string& object) -> absl::Status {
        if (absl::StartsWith(object, kPartPrefix)) {
          const size_t dot = object.rfind('.');
          absl::StatusOr<std::optional<uint64_t>> size =
              StatObject(states_pool_, object);
          if (!size.ok()) return size.status();
          if (!size->has_value()) return absl::OkStatus();
          absl::StatusOr<ObjectAttributes> attributes =
              ReadAttributes(states_pool_, object);
          const int64_t written =
              attributes.ok() ? AttributeInt(*attributes, kWrittenAttribute)
                              : 0;
          scan.parts[object.substr(2, dot - 2)].push_back(
              {object, {static_cast<int64_t>(**size), written}});
          return absl::OkStatus();
        }
        const bool whole = absl::StartsWith(object, kStatePrefix);
        if (!whole && !absl::StartsWith(object, kBlockPrefix)) {
          return absl::OkStatus();  // not an object of this store
        }
        absl::StatusOr<StateKey> key =
            StateKey::FromHex(std::string_view(object).substr(2));
        if (!key.ok()) return absl::OkStatus();
        absl::StatusOr<std::optional<uint64_t>> size =
            StatObject(states_pool_, object);
        if (!size.ok()) return size.status();
        absl::StatusOr<ObjectAttributes> attributes =
            ReadAttributes(states_pool_, object);
        if (!size->has_value() || absl::IsNotFound(attributes.status())) {
          return absl::OkStatus();  // removed since listed
        }
        if (!attributes.ok()) return attributes.status();
        const int64_t written = AttributeInt(*attributes, kWrittenAttribute);
        if (!whole) {
          scan.blocks[*key] = {static_cast<int64_t>(**size), written};
          return absl::OkStatus();
        }
        Scan::StoredState& state = scan.states[*key];
        state.bytes = static_cast<int64_t>(**size);
        state.recompute_tokens =
            AttributeInt(*attributes, "twice.recompute_tokens");
        state.written_unix_ms = written;
        state.tenant = (*attributes)[kTenantAttribute];
        state.manifest = (*attributes)["twice.form"] == "manifest";
        if (state.manifest) {
          absl::StatusOr<std::string> stored = ReadObject(states_pool_, object);
          if (!stored.ok()) return stored.status();
          absl::StatusOr<BlockManifest> manifest = DecodeManifest(*stored);
          // A manifest that does not decode names no block; verify (or the
          // next read) deletes it.
          if (manifest.ok()) {
            for (const BlockRef& block : manifest->blocks) {
              state.blocks.push_back(block.key);
            }
          }
        }
        return absl::OkStatus();
      });
  if (!states.ok()) return states;
  // A striped value's bytes are its head's and its parts'.
  for (const auto& [head, parts] : scan.parts) {
    absl::StatusOr<StateKey> key =
        StateKey::FromHex(std::string_view(head).substr(2));
    if (!key.ok()) continue;
    int64_t bytes = 0;
    for (const auto& [name, part] : parts) bytes += part.bytes;
    if (absl::StartsWith(head, kStatePrefix) && scan.states.contains(*key)) {
      scan.states[*key].bytes += bytes;
    } else if (absl::StartsWith(head, kBlockPrefix) &&
               scan.blocks.contains(*key)) {
      scan.blocks[*key].bytes += bytes;
    }
  }
  const std::string tokens_parts = absl::StrCat(kPartPrefix, kTokensPrefix);
  absl::Status tokens =
      ForEachObject(meta_, kTokensPrefix, [&](const std::string& object) {
        absl::StatusOr<ObjectAttributes> attributes =
            ReadAttributes(meta_, object);
        if (absl::IsNotFound(attributes.status())) return absl::OkStatus();
        if (!attributes.ok()) return attributes.status();
        scan.tokens_objects[object] = {
            0, AttributeInt(*attributes, kWrittenAttribute)};
        return absl::OkStatus();
      });
  if (!tokens.ok()) return tokens;
  return ForEachObject(meta_, tokens_parts, [&](const std::string& object) {
    absl::StatusOr<ObjectAttributes> attributes = ReadAttributes(meta_, object);
    if (absl::IsNotFound(attributes.status())) return absl::OkStatus();
    if (!attributes.ok()) return attributes.status();
    scan.tokens_parts[object] = {
        object.substr(2, object.rfind('.') - 2),
        {0, AttributeInt(*attributes, kWrittenAttribute)}};
    return absl::OkStatus();
  });
}

absl::Status RadosJanitor::CollectGarbage(Scan& scan, JanitorReport& report) {
  const int64_t cutoff =
      UnixMillisNow() - int64_t{1000} * options_.grace.count();
  int deletes = 0;
  // Removes `object` of `pool`, renewing the lease every so often.
  auto remove = [&](librados::IoCtx& pool,
                    const std::string& object) -> absl::Status {
    if (++deletes % kDeletesPerRenewal == 0) {
      if (absl::Status active = StillActive(); !active.ok()) return active;
    }
    return RemoveStripedObject(pool, object);
  };
  for (auto it = scan.states.begin(); it != scan.states.end();) {
    if (scan.named.contains(it->first) ||
        it->second.written_unix_ms >= cutoff) {
      ++it;
      continue;
    }
    if (absl::Status s = remove(states_pool_, StateObjectName(it->first));
        !s.ok()) {
      return s;
    }
    ++report.orphan_states;
    it = scan.states.erase(it);
  }
  std::unordered_set<StateKey, StateKeyHash> manifest_blocks;
  for (const auto& [key, state] : scan.states) {
    manifest_blocks.insert(state.blocks.begin(), state.blocks.end());
  }
  for (auto it = scan.blocks.begin(); it != scan.blocks.end();) {
    if (manifest_blocks.contains(it->first) ||
        it->second.written_unix_ms >= cutoff) {
      ++it;
      continue;
    }
    if (absl::Status s = remove(states_pool_, BlockObjectName(it->first));
        !s.ok()) {
      return s;
    }
    ++report.orphan_blocks;
    it = scan.blocks.erase(it);
  }
  // Parts whose head is gone (a striped write that never finished, or a
  // removal cut short).
  for (const auto& [head, parts] : scan.parts) {
    absl::StatusOr<StateKey> key =
        StateKey::FromHex(std::string_view(head).substr(2));
    const bool headed = key.ok() && (absl::StartsWith(head, kStatePrefix)
                                         ? scan.states.contains(*key)
                                         : scan.blocks.contains(*key));
    if (headed) continue;
    for (const auto& [name, part] : parts) {
      if (part.written_unix_ms >= cutoff) continue;
      if (absl::Status s = remove(states_pool_, name); !s.ok()) return s;
      ++report.orphan_blocks;
    }
  }
  for (const auto& [object, stored] : scan.tokens_objects) {
    if (scan.named_tokens.contains(object) || stored.written_unix_ms >= cutoff)
      continue;
    if (absl::Status s = remove(meta_, object); !s.ok()) return s;
    ++report.orphan_tokens;
  }
  // Parts of a tokens object whose head is gone (a striped write cut
  // short); parts of a head removed just above went with it.
  for (const auto& [part, entry] : scan.tokens_parts) {
    const auto& [head, stored] = entry;
    if (scan.tokens_objects.contains(head) || stored.written_unix_ms >= cutoff)
      continue;
    if (absl::Status s = RemoveObject(meta_, part); !s.ok()) return s;
    ++report.orphan_tokens;
  }
  return absl::OkStatus();
}

absl::Status RadosJanitor::KeepBudget(Scan& scan, JanitorReport& report) {
  int64_t total = 0;
  for (const auto& [key, state] : scan.states) total += state.bytes;
  for (const auto& [key, block] : scan.blocks) total += block.bytes;
  report.state_bytes = total;
  const int64_t budget = options_.state_budget_bytes;
  if (budget == 0 || total <= budget) return absl::OkStatus();

  // The store's own index, filled oldest write first so that its logical
  // clock orders candidates by write time.
  StateCacheIndex index;
  std::vector<std::pair<int64_t, StateKey>> order;
  for (const auto& [key, block] : scan.blocks) {
    order.emplace_back(block.written_unix_ms, key);
  }
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [written, key] : order) {
    CachedState block;
    block.stored_bytes = scan.blocks[key].bytes;
    block.form = StateForm::kBlock;
    index.Upsert(key, block);
  }
  order.clear();
  for (const auto& [key, state] : scan.states) {
    order.emplace_back(state.written_unix_ms, key);
  }
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [written, key] : order) {
    const Scan::StoredState& state = scan.states[key];
    CachedState cached;
    cached.stored_bytes = state.bytes;
    cached.recompute_tokens = state.recompute_tokens;
    cached.form = state.manifest ? StateForm::kManifest : StateForm::kWhole;
    cached.tenant = state.tenant;
    for (const StateKey& block : state.blocks) {
      if (scan.blocks.contains(block)) cached.blocks.push_back(block);
    }
    index.Upsert(key, cached);
    auto named = scan.named.find(key);
    if (named != scan.named.end()) {
      index.AddRefs(key, 1, named->second ? 1 : 0);
    }
  }

  // Past the budget by a little more, as the RocksDB store does, so that
  // the next few writes do not each start an eviction.
  const std::vector<EvictionVictim> victims = index.PickVictims(
      total - budget + budget / 32, options_.eviction_cost_weight, {});
  for (size_t i = 0; i < victims.size(); ++i) {
    if (i % kDeletesPerRenewal == 0) {
      if (absl::Status active = StillActive(); !active.ok()) return active;
    }
    const StateKey& key = victims[i].key;
    if (absl::Status s =
            RemoveStripedObject(states_pool_, StateObjectName(key));
        !s.ok()) {
      return s;
    }
    std::vector<StateKey> orphaned;
    std::optional<CachedState> removed = index.Remove(key, &orphaned);
    int64_t freed = removed.has_value() ? removed->stored_bytes : 0;
    for (const StateKey& block : orphaned) {
      if (absl::Status s =
              RemoveStripedObject(states_pool_, BlockObjectName(block));
          !s.ok()) {
        return s;
      }
      std::optional<CachedState> gone = index.Remove(block, nullptr);
      if (gone.has_value()) freed += gone->stored_bytes;
    }
    ++report.evicted_states;
    report.evicted_bytes += freed;
  }
  report.state_bytes = total - report.evicted_bytes;
  return absl::OkStatus();
}

absl::Status RadosJanitor::VerifyValues(Scan& scan, JanitorReport& report) {
  const int64_t corrupt_before = states_->corruptions();
  int checked = 0;
  for (const auto& [key, state] : scan.states) {
    if (++checked % kDeletesPerRenewal == 0) {
      if (absl::Status active = StillActive(); !active.ok()) return active;
    }
    // The store's read verifies envelope, manifest and blocks, and deletes
    // what fails.
    absl::StatusOr<std::vector<std::string>> blocks =
        states_->GetStateBlocks(key);
    if (!blocks.ok() && !absl::IsNotFound(blocks.status())) {
      return blocks.status();
    }
  }
  report.bad_states = states_->corruptions() - corrupt_before;
  for (const DocumentRef& document : scan.documents) {
    absl::StatusOr<DocumentRecord> record = catalog_->GetDocument(document);
    if (absl::IsDataLoss(record.status())) ++report.bad_records;
    absl::StatusOr<std::vector<int32_t>> tokens = catalog_->GetTokens(document);
    if (absl::IsDataLoss(tokens.status())) ++report.bad_tokens;
  }
  return absl::OkStatus();
}

absl::StatusOr<JanitorReport> RadosJanitor::RunPass() {
  if (!active_) {
    return absl::FailedPreconditionError(
        "the janitor runs a pass only while it holds the lease (Acquire)");
  }
  Scan scan;
  JanitorReport report;
  // Records first: a state stored after this scan but named by a record
  // committed after it is younger than the grace period, so it is safe.
  if (absl::Status s = ScanIndex(scan); !s.ok()) return s;
  if (absl::Status s = ScanStates(scan); !s.ok()) return s;
  report.tenants = static_cast<int64_t>(scan.tenants.size());
  report.documents = static_cast<int64_t>(scan.documents.size());
  report.states = static_cast<int64_t>(scan.states.size());
  report.blocks = static_cast<int64_t>(scan.blocks.size());
  for (const auto& [key, pinned] : scan.named) {
    if (pinned && scan.states.contains(key)) ++report.pinned_states;
  }
  if (absl::Status s = StillActive(); !s.ok()) return s;
  if (options_.verify) {
    if (absl::Status s = VerifyValues(scan, report); !s.ok()) return s;
  }
  if (absl::Status s = CollectGarbage(scan, report); !s.ok()) return s;
  if (absl::Status s = StillActive(); !s.ok()) return s;
  if (absl::Status s = KeepBudget(scan, report); !s.ok()) return s;
  return report;
}

}  // namespace twice::storage
