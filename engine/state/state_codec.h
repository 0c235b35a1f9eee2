// State codec: SequenceState <-> bytes, versioned and checksummed.
//
// Layout (little-endian):
//   magic "TWST" | u32 format version | u32 header bytes |
//   header: fingerprint (len-prefixed), dtype, token count, layer count |
//   per layer: kind (len-prefixed), rank, dims, payload bytes |
//   u64 XXH3 checksum over everything before it.
// Decoding validates every length against the remaining bytes and every
// shape against the model's own empty state before reading a payload. Any
// mismatch is DATA_LOSS (corrupt) or FAILED_PRECONDITION (a valid state of
// another model); it never crashes or returns a partly read state.
#ifndef TWICE_ENGINE_STATE_STATE_CODEC_H_
#define TWICE_ENGINE_STATE_STATE_CODEC_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/state/sequence_state.h"

namespace twice::engine {

// The host layers after SyncToHost (sequence_state.h). A damaged state (a
// read failed partway, or its device copy cannot be read back) encodes as
// the empty string, which DecodeStateInto refuses (DATA_LOSS); callers that can
// report the error sync first (services' SaveState does).
std::string EncodeState(const SequenceState& state);

// Decodes `blob` into `empty`, a fresh state created by the model that will
// use it (it supplies the expected fingerprint, layer kinds and shapes).
[[nodiscard]] absl::Status DecodeStateInto(std::string_view blob,
                                           SequenceState& empty);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_STATE_STATE_CODEC_H_
