// DocumentCatalog: the truth a document's states are computed from — its
// record (segments, the states they name, pins, mode states) and its
// tokens — addressed by a DocumentRef that always carries the tenant.
//
// Contract:
// - PutDocument commits the record, its tokens and its references to the
//   states it names in one atomic write; the caller stores (durably) the
//   states a record names before the record. Tokens live as long as their
//   record and are never recomputed.
// - Writes are conditional on the record's revision (DocumentRecord::
//   revision): PutDocument and UpdateDocument commit only when
//   `record.revision` is the stored record's revision (0: no record is
//   stored), and the committed record then has revision + 1. Otherwise
//   they are ABORTED and change nothing: another writer (another
//   orchestrator replica, or a delete) got there first, and the caller
//   re-reads and decides again. A stored record that no longer decodes may
//   be replaced by a PutDocument of any revision (the repair path).
// - A document of another tenant is NOT_FOUND exactly like a missing one.
// - Thread safety: every method may be called concurrently.
// - Errors: NOT_FOUND (missing), INVALID_ARGUMENT (bad request), DATA_LOSS
//   (a stored record or token blob is corrupt), RESOURCE_EXHAUSTED (the disk
//   is nearly full), ABORTED (a conditional write lost to another writer),
//   UNAVAILABLE (I/O that may succeed on retry), INTERNAL otherwise.
#ifndef TWICE_STORAGE_DOCUMENT_CATALOG_H_
#define TWICE_STORAGE_DOCUMENT_CATALOG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "storage/document_record.h"

namespace twice::storage {

class RecordWatch;  // record_watch.h

// Which document: the tenant is part of the name, so no lookup can leave
// it out.
struct DocumentRef {
  std::string tenant;
  std::string document_id;
};

inline DocumentRef RefOf(const DocumentRecord& record) {
  return {record.tenant, record.document_id};
}

struct DocumentPage {
  std::vector<DocumentRecord> records;
  std::string next_page_token;  // empty when there are no more
};

class DocumentCatalog {
 public:
  virtual ~DocumentCatalog() = default;

  // Creates or replaces the record and its tokens atomically (conditional
  // on record.revision, above).
  [[nodiscard]] virtual absl::Status PutDocument(
      const DocumentRecord& record, absl::Span<const int32_t> tokens) = 0;
  // Replaces only the record (pin, access time); tokens must exist.
  // Conditional on record.revision, as PutDocument.
  [[nodiscard]] virtual absl::Status UpdateDocument(
      const DocumentRecord& record) = 0;
  [[nodiscard]] virtual absl::StatusOr<DocumentRecord> GetDocument(
      const DocumentRef& document) = 0;
  [[nodiscard]] virtual absl::StatusOr<std::vector<int32_t>> GetTokens(
      const DocumentRef& document) = 0;
  // Documents of `tenant` ordered by id; page_size 0 means 100.
  [[nodiscard]] virtual absl::StatusOr<DocumentPage> ListDocuments(
      std::string_view tenant, int page_size, std::string_view page_token) = 0;
  // Deletes the record, its tokens, and the states it names that no other
  // record names. Returns the number of states deleted.
  [[nodiscard]] virtual absl::StatusOr<int64_t> DeleteDocument(
      const DocumentRef& document) = 0;

  // What tells a reader that keeps records that one it kept is still
  // current (record_watch.h); null when this catalog cannot promise that
  // (a kept record is then only a guess, to be confirmed by a read).
  // Lives as long as the catalog.
  virtual RecordWatch* record_watch() { return nullptr; }
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_DOCUMENT_CATALOG_H_
