// What the store keeps for one state, inside an envelope:
//
//   kState payload:      le64 recompute_tokens | le64 written_unix_ms | blob
//   kStateIndex payload: le64 stored_bytes | le64 recompute_tokens |
//                        le64 written_unix_ms | le64 flops_per_token (IEEE
//                        double bits) | u8 form | le32 n | n bytes tenant
//
// The state value is self-describing (it carries its write time). Each
// state also has a small index entry so that counting,
// HasState and eviction scoring by recompute cost per byte never have to
// read multi-megabyte blobs. The index layout is told by its size: the
// first (24 bytes, no flops_per_token, form or tenant) decodes as a whole
// state costed in tokens, the second (33 bytes, no tenant) as a state of no
// tenant; the third carries the tenant.
#ifndef TWICE_STORAGE_STATE_VALUE_H_
#define TWICE_STORAGE_STATE_VALUE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace twice::storage {

// Milliseconds since the Unix epoch from the system clock: the write time
// a value records.
int64_t UnixMillisNow();

struct StateValue {
  int64_t recompute_tokens = 0;
  int64_t written_unix_ms = 0;
  std::string_view blob;  // view into the stored bytes
};

// What a durable key holds (block_manifest.h has the chunked layout).
enum class StateForm : uint8_t {
  kWhole = 0,     // one state value
  kManifest = 1,  // a chunked state: the list of its blocks
  kBlock = 2,     // one block of a chunked state (a state value)
};

struct StateIndexEntry {
  int64_t stored_bytes = 0;  // size of the enveloped value under the key
  int64_t recompute_tokens = 0;
  int64_t written_unix_ms = 0;
  // Prefill FLOPs per token of the model that made the state; 0 when the
  // caller did not say (cost is then counted in tokens).
  double flops_per_token = 0;
  StateForm form = StateForm::kWhole;
  // The tenant whose byte budget the value counts against; empty for none.
  // At most kMaxRecordFieldBytes (record_validation.h).
  std::string tenant{};
};

std::string EncodeStateValue(std::string_view blob, int64_t recompute_tokens,
                             int64_t written_unix_ms);
// EncodeStateValue as the bytes around `blob`: the value is head + blob +
// tail (blob_envelope.h, SealEnvelopeEdges).
struct StateValueEdges {
  std::string head;
  std::string tail;
  int64_t stored_bytes = 0;  // head + blob + tail
};
StateValueEdges EncodeStateValueEdges(std::string_view blob,
                                      int64_t recompute_tokens,
                                      int64_t written_unix_ms);

// DATA_LOSS when the envelope or the fields are invalid.
[[nodiscard]] absl::StatusOr<StateValue> DecodeStateValue(
    std::string_view stored);

// DecodeStateValue that copies the blob into `*blob` while verifying, in
// one pass over the bytes (the read path of large states). The returned
// value's `blob` view is empty.
[[nodiscard]] absl::StatusOr<StateValue> DecodeStateValueCopy(
    std::string_view stored, std::string* blob);

std::string EncodeStateIndex(const StateIndexEntry& entry);
// DATA_LOSS when the envelope or the fields are invalid.
[[nodiscard]] absl::StatusOr<StateIndexEntry> DecodeStateIndex(
    std::string_view stored);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_STATE_VALUE_H_
