// The reference index: which document records name which states.
//
// Column family `refs`, one entry per (state, record) pair:
//
//   key:   state key[32] | tenant '\0' document_id
//   value: envelope of kind kRef; payload u8 pinned (0 or 1), the pin flag
//          of the naming record
//
// Entries are written and deleted in the same WriteBatch as the records, so
// they always agree with them. They let DeleteDocument find the states no
// other record names, and the evictor know which states are pinned, in time
// proportional to the states a record names rather than to every record.
#ifndef TWICE_STORAGE_STATE_REF_H_
#define TWICE_STORAGE_STATE_REF_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "storage/state_key.h"

namespace twice::storage {

// `document_key` is the documents family key (tenant '\0' document_id).
std::string RefKey(const StateKey& state, std::string_view document_key);

struct RefKeyParts {
  StateKey state;
  std::string_view document_key;  // view into the parsed key
};
// DATA_LOSS when the key is too short to hold a state key and a document.
[[nodiscard]] absl::StatusOr<RefKeyParts> ParseRefKey(std::string_view key);

std::string EncodeRef(bool pinned);
// The pin flag; DATA_LOSS when the value is not a ref envelope.
[[nodiscard]] absl::StatusOr<bool> DecodeRef(std::string_view stored);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_STATE_REF_H_
