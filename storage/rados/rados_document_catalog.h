// RadosDocumentCatalog: the DocumentCatalog (storage/document_catalog.h) on
// a Ceph RADOS pool, beside RadosStateStore, so every orchestrator, prefill
// and decode process reads and commits documents in the cluster directly.
//
// Layout (pool `<prefix>-meta`):
//   i.<sha256(tenant)>.<bucket>   an index object of one tenant; a document
//                                 belongs to bucket sha256(id)[0] % 16. Its
//                                 omap holds, per document id:
//     r.<id>               the record (record_codec.h, enveloped)
//     v.<id>               its revision, in decimal: what a conditional
//                          write compares (omap_cmp), a missing key being
//                          revision 0
//     t.<id>               the name of its tokens object
//     f.<state hex>.<id>   one per state the record names, "1" when the
//                          record is pinned, else "0": what DeleteDocument
//                          and the janitor read to know a state is named
//   t.<random 128-bit hex>   the tokens of one document write
//                            (token_codec.h), immutable, with xattrs
//                            twice.tenant, twice.document and
//                            twice.written_unix_ms for the janitor
//
// A write stores its tokens object first and then commits record,
// revision, tokens name and refs in one atomic operation on the index
// object, conditional on the revision it read; so a crash or a lost race
// leaves at most an unnamed tokens object (collected by the janitor), never
// a record that names missing tokens. The tokens object a write replaces is
// removed after the commit. Buckets keep each index object's omap small
// (Ceph warns past 200k keys per object); listing merges them.
//
// States are DeleteDocument's only cross-object step: after the commit it
// deletes, through the state store, each state the document named that no
// record of the tenant names any more (state keys include the tenant,
// state_key.h, so no other tenant can name them). A record written between
// that check and the delete finds its state missing and recomputes it, as
// after an eviction.
//
// Every commit to an index object (a write or a delete) is announced to
// the processes watching it (rados_record_watch.h) before it returns, so a
// reader that keeps records can trust what it kept without reading again.
//
// Thread-safe: librados I/O contexts are, and no state is kept in memory
// but counters and the watches.
#ifndef TWICE_STORAGE_RADOS_RADOS_DOCUMENT_CATALOG_H_
#define TWICE_STORAGE_RADOS_RADOS_DOCUMENT_CATALOG_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <rados/librados.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/document_catalog.h"
#include "storage/rados/rados_cluster.h"
#include "storage/rados/rados_record_watch.h"
#include "storage/state_store.h"

namespace twice::storage {

// Index objects per tenant. Part of the layout: changing it moves
// documents between buckets.
inline constexpr int kRadosIndexBuckets = 16;

// Orders StateKeys by their bytes, for ordered maps of them.
struct StateKeyLess {
  bool operator()(const StateKey& a, const StateKey& b) const {
    return a.digest < b.digest;
  }
};

// The states a record names, with its pin flag.
using NamedStateRefs = std::map<StateKey, bool, StateKeyLess>;

class RadosDocumentCatalog final : public DocumentCatalog {
 public:
  // The catalog in pool `pool` of `cluster` (created when missing);
  // DeleteDocument deletes states through `states`. Both must outlive the
  // catalog.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RadosDocumentCatalog>>
  Open(RadosCluster& cluster, const std::string& pool, StateStore& states,
       RecordWatchOptions watch_options = {});

  absl::Status PutDocument(const DocumentRecord& record,
                           absl::Span<const int32_t> tokens) override;
  absl::Status UpdateDocument(const DocumentRecord& record) override;
  absl::StatusOr<DocumentRecord> GetDocument(
      const DocumentRef& document) override;
  absl::StatusOr<std::vector<int32_t>> GetTokens(
      const DocumentRef& document) override;
  absl::StatusOr<DocumentPage> ListDocuments(
      std::string_view tenant, int page_size,
      std::string_view page_token) override;
  absl::StatusOr<int64_t> DeleteDocument(const DocumentRef& document) override;
  RadosRecordWatch* record_watch() override { return watch_.get(); }

  // Times a stored record, revision or tokens object was found corrupt or
  // missing (StoreStats::catalog_corruptions).
  int64_t catalog_corruptions() const { return catalog_corruptions_.load(); }

  librados::IoCtx& pool() { return pool_; }

 private:
  // What the index holds for one document (each empty when absent).
  struct IndexEntry {
    std::optional<std::string> record;
    std::optional<std::string> revision;
    std::optional<std::string> tokens_object;
  };

  RadosDocumentCatalog(librados::IoCtx pool, StateStore& states,
                       std::unique_ptr<RadosRecordWatch> watch)
      : pool_(std::move(pool)), states_(states), watch_(std::move(watch)) {}

  absl::StatusOr<IndexEntry> ReadEntry(const DocumentRef& document);
  // The stored record of `entry`, decoded and checked (DATA_LOSS counted).
  absl::StatusOr<DocumentRecord> DecodeEntry(const DocumentRef& document,
                                             const IndexEntry& entry);
  // The states the stored record (`record`, as DecodeEntry read it) names
  // with their pin flags: from the record, or from its refs when the record
  // does not decode; none when there is no record.
  absl::StatusOr<NamedStateRefs> StoredRefs(
      const DocumentRef& document,
      const absl::StatusOr<DocumentRecord>& record);
  // Commits `record` (revision checked against `entry`, committed as
  // revision + 1) with `tokens_object` as its tokens.
  absl::Status Commit(const DocumentRecord& record, const IndexEntry& entry,
                      const std::string& tokens_object);
  // For each of `states`, whether any record of `tenant` names it.
  absl::StatusOr<std::vector<bool>> NamedByAnyRecord(
      const std::string& tenant, const std::vector<StateKey>& states);
  absl::Status CountLoss(absl::Status status);

  // Announces the commit of `r` (0, or an error after which it may have
  // been applied) to the watchers of `index_object`.
  void AnnounceCommit(int r, const std::string& index_object);

  librados::IoCtx pool_;
  StateStore& states_;
  std::unique_ptr<RadosRecordWatch> watch_;
  std::atomic<int64_t> catalog_corruptions_{0};
};

// Object names of the layout above.
std::string IndexObjectName(std::string_view tenant,
                            std::string_view document_id);
std::string IndexObjectName(std::string_view tenant, int bucket);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_RADOS_RADOS_DOCUMENT_CATALOG_H_
