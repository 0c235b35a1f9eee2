#include "services/common/state_io.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/state/state_blocks.h"
#include "engine/state/state_codec.h"
#include "services/common/log.h"

namespace twice::services {

absl::StatusOr<std::unique_ptr<engine::SequenceState>> LoadState(
    storage::StateStore& store, const engine::Model& model,
    const storage::StateKey& key) {
  std::unique_ptr<engine::SequenceState> state = model.NewState();
  absl::StatusOr<std::vector<std::string>> blocks = store.GetStateBlocks(key);
  if (!blocks.ok()) return blocks.status();
  const absl::Status decoded = engine::DecodeStateBlocksInto(*blocks, *state);
  if (decoded.ok()) return state;
  if (decoded.code() != absl::StatusCode::kDataLoss) return decoded;
  // The envelope was intact but the state inside is not: treat it like any
  // other corrupt state, so it is recomputed rather than used or kept, and
  // counted as a corruption and a miss.
  Log(LogLevel::kWarning, "state.corrupt",
      absl::StrCat("key=", key.Hex(),
                   " reason=", LogValue(std::string(decoded.message()))));
  absl::Status deleted = store.DiscardCorruptState(key);
  if (!deleted.ok()) {
    Log(LogLevel::kError, "state.delete_failed",
        absl::StrCat("key=", key.Hex(),
                     " reason=", LogValue(std::string(deleted.message()))));
  }
  return absl::NotFoundError(
      absl::StrCat("state ", key.Hex(),
                   " was corrupt and was deleted: ", decoded.message()));
}

namespace {

absl::Status PutBlocks(storage::StateStore& store, const storage::StateKey& key,
                       const engine::SequenceState& state,
                       const std::optional<storage::StateKey>& base,
                       absl::Span<const int64_t> base_rows,
                       std::string_view tenant) {
  absl::StatusOr<std::vector<std::string>> blocks =
      engine::EncodeStateBlocks(state, base_rows);
  if (!blocks.ok()) return blocks.status();
  const std::vector<std::string_view> views(blocks->begin(), blocks->end());
  return store.PutStateBlocks(key, base, views,
                              {.recompute_tokens = state.token_count(),
                               .flops_per_token = 0,
                               .tenant = std::string(tenant)});
}

}  // namespace

absl::Status SaveState(storage::StateStore& store, const storage::StateKey& key,
                       const engine::SequenceState& state,
                       std::string_view tenant,
                       const std::optional<StateBase>& base) {
  // A device-resident state's newest layers are on the device.
  if (absl::Status synced = state.SyncToHost(); !synced.ok()) return synced;
  if (!engine::HasBlockRows(state)) {
    const std::string blob = engine::EncodeState(state);
    return store.PutState(key, blob,
                          {.recompute_tokens = state.token_count(),
                           .flops_per_token = 0,
                           .tenant = std::string(tenant)});
  }
  if (base.has_value() && base->key != key) {
    absl::Status extended =
        PutBlocks(store, key, state, base->key, base->rows, tenant);
    // NOT_FOUND: the base is gone or stored whole; write every block.
    if (extended.code() != absl::StatusCode::kNotFound) return extended;
  }
  return PutBlocks(store, key, state, std::nullopt, {}, tenant);
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
