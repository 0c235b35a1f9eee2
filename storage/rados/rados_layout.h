// The names of the RADOS store's objects and omap keys, in one place for
// the store (rados_state_store.h, rados_document_catalog.h, whose headers
// describe the layout) and the janitor that scans it (rados_janitor.h).
#ifndef TWICE_STORAGE_RADOS_RADOS_LAYOUT_H_
#define TWICE_STORAGE_RADOS_RADOS_LAYOUT_H_

#include <cstddef>

namespace twice::storage::rados_layout {

// States pool: objects.
inline constexpr char kStatePrefix[] = "s.";  // whole states and manifests
inline constexpr char kBlockPrefix[] = "b.";  // blocks of chunked states
inline constexpr char kPartPrefix[] = "p.";   // parts of striped values

// Meta pool: objects.
inline constexpr char kIndexPrefix[] = "i.";   // per-tenant index buckets
inline constexpr char kTokensPrefix[] = "t.";  // one document write's tokens
inline constexpr char kJanitorLock[] = "janitor.lock";

// Omap keys of an index object, each followed by a document id (refs: by
// "<state hex>." and then the id).
inline constexpr char kRecordKey[] = "r.";
inline constexpr char kRevisionKey[] = "v.";
inline constexpr char kTokensKey[] = "t.";
inline constexpr char kRefKey[] = "f.";
inline constexpr size_t kStateHexDigits = 64;

// Xattrs.
inline constexpr char kTenantAttribute[] = "twice.tenant";
inline constexpr char kWrittenAttribute[] = "twice.written_unix_ms";

}  // namespace twice::storage::rados_layout

#endif  // TWICE_STORAGE_RADOS_RADOS_LAYOUT_H_
