#include "services/common/state_io.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/state/state_codec.h"
#include "services/common/log.h"

namespace twice::services {

absl::StatusOr<std::unique_ptr<engine::SequenceState>> LoadState(
    storage::StateStore& store, const engine::Model& model,
    const storage::StateKey& key, bool ephemeral) {
  absl::StatusOr<std::string> blob = store.GetState(key, ephemeral);
  if (!blob.ok()) return blob.status();
  std::unique_ptr<engine::SequenceState> state = model.NewState();
  absl::Status decoded = engine::DecodeStateInto(*blob, *state);
  if (decoded.ok()) return state;
  if (decoded.code() != absl::StatusCode::kDataLoss) return decoded;
  // The envelope was intact but the state inside is not: treat it like any
  // other corrupt state, so it is recomputed rather than used or kept, and
  // counted as a corruption and a miss.
  Log(LogLevel::kWarning, "state.corrupt",
      absl::StrCat("key=", key.Hex(),
                   " reason=", LogValue(std::string(decoded.message()))));
  absl::Status deleted = store.DiscardCorruptState(key, ephemeral);
  if (!deleted.ok()) {
    Log(LogLevel::kError, "state.delete_failed",
        absl::StrCat("key=", key.Hex(),
                     " reason=", LogValue(std::string(deleted.message()))));
  }
  return absl::NotFoundError(
      absl::StrCat("state ", key.Hex(),
                   " was corrupt and was deleted: ", decoded.message()));
}

absl::Status SaveState(storage::StateStore& store, const storage::StateKey& key,
                       const engine::SequenceState& state, bool ephemeral) {
  const std::string blob = engine::EncodeState(state);
  return store.PutState(key, blob, {ephemeral, state.token_count()});
}

std::string_view PrefillModeName(engine::PrefillMode mode) {
  switch (mode) {
    case engine::PrefillMode::kCausal:
      return "causal";
    case engine::PrefillMode::kPrefix:
      return "prefix";
    case engine::PrefillMode::kPrefixReadTwice:
      return "prefix_read_twice";
    case engine::PrefillMode::kPrefixUnpadded:
      return "prefix_unpadded";
  }
  return "causal";
}

}  // namespace twice::services
