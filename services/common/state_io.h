// Loading and saving engine states through a StateStore: the seam between
// the engine's codec and the store's bytes.
#ifndef TWICE_SERVICES_COMMON_STATE_IO_H_
#define TWICE_SERVICES_COMMON_STATE_IO_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/models/model.h"
#include "engine/state/sequence_state.h"
#include "storage/state_store.h"

namespace twice::services {

// Loads and decodes the state `key` for `model`. A state that is missing, or
// that the store or the codec finds corrupt, is NOT_FOUND (a corrupt one is
// deleted first), so the caller recomputes it; a valid state of another
// model is FAILED_PRECONDITION. States are read as blocks
// (StateStore::GetStateBlocks), which serves whole and chunked states alike.
[[nodiscard]] absl::StatusOr<std::unique_ptr<engine::SequenceState>> LoadState(
    storage::StateStore& store, const engine::Model& model,
    const storage::StateKey& key);

// A stored state that a state being saved extends (the state it was
// read from, before the segment): its key and the rows it holds
// (engine::StateRowCounts of the state as it was loaded or saved).
struct StateBase {
  storage::StateKey key;
  std::vector<int64_t> rows;
};

// Stores `state` under `key`. A state with append-only rows
// (engine::HasBlockRows, RAT's chunk-KV) is stored as blocks
// (engine/state/state_blocks.h): with `base`, only the rows added since the
// base and a small head are written (StateStore::PutStateBlocks); when the
// store no longer holds the base as blocks (NOT_FOUND), or without a base,
// every block is written. Other states are stored whole. A state counts
// against the byte budget of `tenant` (the
// tenant of its chain root; storage::PutStateOptions::tenant).
[[nodiscard]] absl::Status SaveState(
    storage::StateStore& store, const storage::StateKey& key,
    const engine::SequenceState& state, std::string_view tenant,
    const std::optional<StateBase>& base = std::nullopt);

// The chain-root mode name of a prefill mode ("causal", "prefix", ...): chains
// of different modes never share a key, since their states differ.
std::string_view PrefillModeName(engine::PrefillMode mode);

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_STATE_IO_H_
