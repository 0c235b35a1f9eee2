#include "storage/rados/rados_store.h"

#include <utility>

#include "storage/rados/rados_document_catalog.h"
#include "storage/rados/rados_state_store.h"

namespace twice::storage {
namespace {

class RadosStore final : public Store {
 public:
  RadosStore(std::unique_ptr<RadosCluster> cluster, std::string states_pool,
             std::unique_ptr<RadosStateStore> states,
             std::unique_ptr<RadosDocumentCatalog> catalog)
      : cluster_(std::move(cluster)),
        states_pool_(std::move(states_pool)),
        states_(std::move(states)),
        catalog_(std::move(catalog)) {}

  absl::Status PutState(const StateKey& key, std::string_view blob,
                        const PutStateOptions& options) override {
    return states_->PutState(key, blob, options);
  }
  absl::StatusOr<std::string> GetState(const StateKey& key) override {
    return states_->GetState(key);
  }
  absl::StatusOr<bool> HasState(const StateKey& key) override {
    return states_->HasState(key);
  }
  absl::Status DeleteState(const StateKey& key) override {
    return states_->DeleteState(key);
  }
  absl::Status DiscardCorruptState(const StateKey& key) override {
    return states_->DiscardCorruptState(key);
  }
  absl::Status PutStateBlocks(const StateKey& key,
                              const std::optional<StateKey>& base,
                              absl::Span<const std::string_view> new_blocks,
                              const PutStateOptions& options) override {
    return states_->PutStateBlocks(key, base, new_blocks, options);
  }
  absl::StatusOr<std::vector<std::string>> GetStateBlocks(
      const StateKey& key) override {
    return states_->GetStateBlocks(key);
  }
  absl::StatusOr<StatePage> ListStates(int page_size,
                                       std::string_view page_token) override {
    return states_->ListStates(page_size, page_token);
  }
  void RecordRecompute() override { states_->RecordRecompute(); }

  absl::Status PutDocument(const DocumentRecord& record,
                           absl::Span<const int32_t> tokens) override {
    return catalog_->PutDocument(record, tokens);
  }
  absl::Status UpdateDocument(const DocumentRecord& record) override {
    return catalog_->UpdateDocument(record);
  }
  absl::StatusOr<DocumentRecord> GetDocument(
      const DocumentRef& document) override {
    return catalog_->GetDocument(document);
  }
  absl::StatusOr<std::vector<int32_t>> GetTokens(
      const DocumentRef& document) override {
    return catalog_->GetTokens(document);
  }
  absl::StatusOr<DocumentPage> ListDocuments(
      std::string_view tenant, int page_size,
      std::string_view page_token) override {
    return catalog_->ListDocuments(tenant, page_size, page_token);
  }
  absl::StatusOr<int64_t> DeleteDocument(const DocumentRef& document) override {
    return catalog_->DeleteDocument(document);
  }
  RecordWatch* record_watch() override { return catalog_->record_watch(); }

  // What this process saw, and the states pool's size as the cluster
  // reports it (objects include the blocks of chunked states). The count of
  // documents is not kept: it would take a listing of every tenant.
  StoreStats Stats() override {
    StoreStats stats;
    absl::StatusOr<PoolUsage> usage = cluster_->Usage(states_pool_);
    if (usage.ok()) {
      stats.state_bytes = usage->bytes;
      stats.state_count = usage->objects;
      stats.disk_bytes = usage->bytes;
    }
    stats.hits = states_->hits();
    stats.misses = states_->misses();
    stats.corruptions = states_->corruptions();
    stats.recomputes = states_->recomputes();
    stats.catalog_corruptions = catalog_->catalog_corruptions();
    stats.record_notifies_unacknowledged =
        catalog_->record_watch()->unacknowledged_announcements();
    stats.record_watch_changes = catalog_->record_watch()->changes_seen();
    return stats;
  }
  absl::StatusOr<VerifyReport> Verify(const VerifyOptions&) override {
    return absl::UnimplementedError(
        "a RADOS store is verified by the janitor (twice-server "
        "--role=janitor); Ceph scrubs its own replicas");
  }
  absl::StatusOr<CompactReport> Compact() override {
    return absl::UnimplementedError(
        "a RADOS store has nothing of Twice's to compact: the OSDs' BlueStore "
        "compacts itself");
  }
  absl::StatusOr<GcReport> CollectGarbage() override {
    return absl::UnimplementedError(
        "a RADOS store's garbage is collected by the janitor (twice-server "
        "--role=janitor)");
  }
  absl::StatusOr<BackupReport> Backup(const std::string&) override {
    return absl::UnimplementedError(
        "back up a RADOS store with Ceph's pool snapshots (rados mksnap) of "
        "its meta and states pools");
  }

 private:
  std::unique_ptr<RadosCluster> cluster_;
  std::string states_pool_;
  // Declared after the cluster, so destroyed before it.
  std::unique_ptr<RadosStateStore> states_;
  std::unique_ptr<RadosDocumentCatalog> catalog_;
};

}  // namespace

std::string RadosStatesPool(const RadosStoreOptions& options) {
  return options.pool_prefix + "-states";
}
std::string RadosMetaPool(const RadosStoreOptions& options) {
  return options.pool_prefix + "-meta";
}

absl::StatusOr<std::unique_ptr<Store>> OpenRadosStore(
    const RadosStoreOptions& options) {
  if (options.pool_prefix.empty()) {
    return absl::InvalidArgumentError("the RADOS pool prefix is empty");
  }
  absl::StatusOr<std::unique_ptr<RadosCluster>> cluster =
      RadosCluster::Connect(options.cluster);
  if (!cluster.ok()) return cluster.status();
  absl::StatusOr<std::unique_ptr<RadosStateStore>> states =
      RadosStateStore::Open(**cluster, RadosStatesPool(options));
  if (!states.ok()) return states.status();
  absl::StatusOr<std::unique_ptr<RadosDocumentCatalog>> catalog =
      RadosDocumentCatalog::Open(**cluster, RadosMetaPool(options), **states,
                                 options.record_watch);
  if (!catalog.ok()) return catalog.status();
  return std::make_unique<RadosStore>(*std::move(cluster),
                                      RadosStatesPool(options),
                                      *std::move(states), *std::move(catalog));
}

}  // namespace twice::storage
