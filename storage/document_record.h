// The catalog entry of a document. Tokens are stored beside it and are the
// truth; the states it names are a cache that may be recomputed.
#ifndef TWICE_STORAGE_DOCUMENT_RECORD_H_
#define TWICE_STORAGE_DOCUMENT_RECORD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "storage/state_key.h"

namespace twice::storage {

// A token-exact resume point: the state after tokens [0, end_token).
struct SegmentBoundary {
  int64_t end_token = 0;
  StateKey state_key;
};

struct DocumentRecord {
  std::string tenant;
  std::string document_id;
  std::string model;              // model name used at ingest
  std::string model_fingerprint;  // hex
  std::string text_sha256;        // hex; empty when ingested as token ids
  int64_t token_count = 0;
  int64_t segment_tokens = 0;
  // Causal chain, in order; the last boundary covers the whole document.
  std::vector<SegmentBoundary> segments;
  // Extra whole-document states by mode name (for example "prefix").
  std::vector<std::pair<std::string, StateKey>> mode_states;
  bool pinned = false;
  int64_t created_unix_ms = 0;
  int64_t accessed_unix_ms = 0;
  // The catalog's revision of this record, for conditional writes
  // (document_catalog.h): 0 for a record not stored yet; a stored record
  // carries the revision of its last write. Writers pass back the revision
  // they read; the catalog refuses a write made from a stale read.
  int64_t revision = 0;
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_DOCUMENT_RECORD_H_
