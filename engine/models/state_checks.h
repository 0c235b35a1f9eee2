// The input checks every model runs before a read changes any state, and
// the rule for a failure after that.
//
// A read (Prefill, Step, StepBatch) is either refused with every state
// unchanged (bad token ids, a state of another model, a layer state of the
// wrong kind or length: all checked here, for every layer, before the first
// layer reads) or runs in place to its end. No state is copied per step.
// Once inputs are valid the kernels cannot fail on the CPU; if one fails
// anyway (a device fault), the states the read had begun changing are
// marked damaged and refused by later reads.
#ifndef TWICE_ENGINE_MODELS_STATE_CHECKS_H_
#define TWICE_ENGINE_MODELS_STATE_CHECKS_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/layers/mixer.h"
#include "engine/state/sequence_state.h"

namespace twice::engine {

// INVALID_ARGUMENT for no tokens or an id outside [0, vocab_size).
[[nodiscard]] absl::Status CheckTokenIds(absl::Span<const int32_t> tokens,
                                         int32_t vocab_size);

// FAILED_PRECONDITION unless `state` belongs to the model with
// `fingerprint`, is not damaged, has one layer per mixer, and every layer
// passes its mixer's ValidateState at the state's token count. A state a
// device executor holds (sequence_state.h) is first synced to the host and
// detached from the device.
[[nodiscard]] absl::Status CheckReadableState(
    SequenceState& state, std::string_view fingerprint,
    absl::Span<const Mixer* const> mixers);

// Returns `status`; when it is an error, first marks every state damaged
// (for the failure of a read that had begun changing them).
[[nodiscard]] absl::Status DamagedOnError(
    absl::Status status, absl::Span<SequenceState* const> states);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_STATE_CHECKS_H_
