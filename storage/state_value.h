// What the store keeps for one state, inside an envelope:
//
//   kState payload:      le64 recompute_tokens | le64 written_unix_ms | blob
//   kStateIndex payload: le64 stored_bytes | le64 recompute_tokens |
//                        le64 written_unix_ms
//
// The state value is self-describing (an ephemeral state's age is read from
// it). Each durable state also has a small index entry so that counting,
// HasState and, later, eviction scoring by recompute cost per byte never have
// to read multi-megabyte blobs. Both layouts are fixed and versioned by the
// envelope version.
#ifndef TWICE_STORAGE_STATE_VALUE_H_
#define TWICE_STORAGE_STATE_VALUE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace twice::storage {

struct StateValue {
  int64_t recompute_tokens = 0;
  int64_t written_unix_ms = 0;
  std::string_view blob;  // view into the stored bytes
};

struct StateIndexEntry {
  int64_t stored_bytes = 0;  // size of the enveloped state value
  int64_t recompute_tokens = 0;
  int64_t written_unix_ms = 0;
};

std::string EncodeStateValue(std::string_view blob, int64_t recompute_tokens,
                             int64_t written_unix_ms);
// DATA_LOSS when the envelope or the fields are invalid.
[[nodiscard]] absl::StatusOr<StateValue> DecodeStateValue(
    std::string_view stored);

std::string EncodeStateIndex(const StateIndexEntry& entry);
// DATA_LOSS when the envelope or the fields are invalid.
[[nodiscard]] absl::StatusOr<StateIndexEntry> DecodeStateIndex(
    std::string_view stored);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_STATE_VALUE_H_
