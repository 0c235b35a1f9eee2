// Loading and saving engine states through a StateStore: the seam between
// the engine's codec and the store's bytes.
#ifndef TWICE_SERVICES_COMMON_STATE_IO_H_
#define TWICE_SERVICES_COMMON_STATE_IO_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/models/model.h"
#include "engine/state/sequence_state.h"
#include "storage/state_store.h"

namespace twice::services {

// Loads and decodes the state `key` for `model`. A state that is missing, or
// that the store or the codec finds corrupt, is NOT_FOUND (a corrupt one is
// deleted first), so the caller recomputes it; a valid state of another
// model is FAILED_PRECONDITION.
[[nodiscard]] absl::StatusOr<std::unique_ptr<engine::SequenceState>> LoadState(
    storage::StateStore& store, const engine::Model& model,
    const storage::StateKey& key, bool ephemeral);

[[nodiscard]] absl::Status SaveState(storage::StateStore& store,
                                     const storage::StateKey& key,
                                     const engine::SequenceState& state,
                                     bool ephemeral);

// The chain-root mode name of a prefill mode ("causal", "prefix", ...): chains
// of different modes never share a key, since their states differ.
std::string_view PrefillModeName(engine::PrefillMode mode);

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_STATE_IO_H_
