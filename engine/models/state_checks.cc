#include "engine/models/state_checks.h"

#include "absl/strings/str_cat.h"
#include "engine/util/absl_view.h"

namespace twice::engine {

absl::Status CheckTokenIds(absl::Span<const int32_t> tokens,
                           int32_t vocab_size) {
  if (tokens.empty()) return absl::InvalidArgumentError("no tokens to read");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ", tokens[i], " at index ", i,
                       " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckReadableState(SequenceState& state,
                                std::string_view fingerprint,
                                absl::Span<const Mixer* const> mixers) {
  if (state.fingerprint() != fingerprint) {
    return absl::FailedPreconditionError(
        absl::StrCat("state belongs to model ", state.fingerprint(),
                     ", not to ", AbslView(fingerprint)));
  }
  if (state.damaged()) {
    return absl::FailedPreconditionError(
        "state was left incomplete by a failed read; recompute it from the "
        "document's tokens");
  }
  // A host read of a state a device executor holds: its newest copy comes
  // home and the device copy is dropped (the host copy will move on).
  if (state.residency() != nullptr) {
    if (absl::Status synced = state.SyncToHost(); !synced.ok()) return synced;
    state.DetachResidency();
  }
  if (state.num_layers() != static_cast<int>(mixers.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("state has ", state.num_layers(), " layers, the model ",
                     mixers.size()));
  }
  for (int l = 0; l < state.num_layers(); ++l) {
    absl::Status valid =
        mixers[l]->ValidateState(state.layer(l), state.token_count());
    if (!valid.ok()) {
      return absl::Status(valid.code(),
                          absl::StrCat("layer ", l, ": ", valid.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status DamagedOnError(absl::Status status,
                            absl::Span<SequenceState* const> states) {
  if (!status.ok()) {
    for (SequenceState* s : states) s->MarkDamaged();
  }
  return status;
}

}  // namespace twice::engine
