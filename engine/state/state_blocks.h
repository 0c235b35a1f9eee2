// State blocks: a SequenceState whose layers grow by append-only rows
// (BlockRowsState, e.g. RAT's chunk-KV) encoded as blocks, so that a state
// extending a stored base state writes only what the base lacks.
//
// Layout. A state that extends a base holding R_l rows of layer l encodes
// as at most two blocks:
//   rows block   rows [R_l, row_count_l) of every BlockRowsState layer
//                (omitted when no layer has new rows);
//   head block   everything else: fingerprint, dtype, token count, each
//                other layer's whole section, and each rows layer's head
//                (SerializeHead) with its total row count.
// The store (storage PutStateBlocks) keeps a state as the base's block list
// followed by the new blocks, so a chain of extensions is stored as
//   [rows_1, head_1, rows_2, head_2, ..., rows_n, head_n]
// and decoding takes every rows block in order and the LAST head; the
// older heads are checked (magic, version, checksum) and skipped. Why this
// layout: the store's API only appends to a base's list and never drops a
// block, so a head cannot be replaced in place; a stale head costs one small
// read, while putting the head first or rewriting the rows would make every
// extension write the whole state again. A state that extends nothing (or
// whose base is gone) is [rows, head] with rows from 0.
//
// Block payload (little-endian), the same frame for both kinds:
//   magic "TWSB" | u32 version = 1 | u32 kind (1 rows, 2 head) |
//   u64 body bytes | body | u64 XXH3-64 of every byte before it.
//   rows body: string fingerprint | u32 entries |
//              per entry: u32 layer | i64 first row | i64 rows |
//                         u64 bytes | raw row bytes
//   head body: string fingerprint | string dtype ("f32") | i64 token count |
//              u32 layer count | per layer: string kind | i64 rows (-1: a
//              layer stored whole) | u64 section bytes | section
//   (strings are u32 length | bytes, as in state_io.h).
// Decoding validates every length against the bytes present before reading
// or allocating, that each rows entry starts where the rows held so far end
// and never goes past the head's row count, and that every layer ends with
// exactly the head's rows. Any mismatch is DATA_LOSS (FAILED_PRECONDITION
// for a valid state of another model); the target state is replaced only
// when everything decoded.
#ifndef TWICE_ENGINE_STATE_STATE_BLOCKS_H_
#define TWICE_ENGINE_STATE_STATE_BLOCKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/state/sequence_state.h"

namespace twice::engine {

// Whether any layer of `state` is a BlockRowsState (else store it whole).
bool HasBlockRows(const SequenceState& state);

// Rows held by each layer (0 for layers that are not BlockRowsState): what
// a stored copy of `state` holds, to pass as `base_rows` later.
std::vector<int64_t> StateRowCounts(const SequenceState& state);

// The blocks that extend a stored base holding `base_rows` (one entry per
// layer, as StateRowCounts returned for the base; empty: no base, every
// row is written): [rows block, head block], or [head block] when no layer
// has new rows. INVALID_ARGUMENT when `base_rows` does not fit the state.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> EncodeStateBlocks(
    const SequenceState& state, absl::Span<const int64_t> base_rows);

// Decodes the blocks of a stored state into `empty`, a fresh state made by
// the model that will use it. One block in the whole-state codec format
// (state_codec.h) is decoded as such, so a caller may read every durable
// state as blocks.
[[nodiscard]] absl::Status DecodeStateBlocksInto(
    absl::Span<const std::string> blocks, SequenceState& empty);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_STATE_STATE_BLOCKS_H_
