#include "engine/layers/feed_forward_mixer.h"

#include "engine/layers/stateless_state.h"
#include "kernels/status_macros.h"

namespace twice::engine {

std::unique_ptr<LayerState> FeedForwardMixer::NewState() const {
  return std::make_unique<StatelessState>();
}

absl::Status FeedForwardMixer::ValidateState(LayerState& state,
                                             int64_t /*start_pos*/) const {
  if (dynamic_cast<StatelessState*>(&state) == nullptr) {
    return absl::FailedPreconditionError(
        "FeedForwardMixer: layer state is not a stateless state");
  }
  return absl::OkStatus();
}

absl::Status FeedForwardMixer::Forward(absl::Span<const float> x,
                                       int64_t tokens, int64_t start_pos,
                                       LayerState& state,
                                       absl::Span<float> out) const {
  TWICE_RETURN_IF_ERROR(ValidateState(state, start_pos));
  return ffn_->Forward(x, tokens, out);
}

absl::Status FeedForwardMixer::StepBatch(absl::Span<const float> x,
                                         absl::Span<LayerState* const> states,
                                         absl::Span<const int64_t> positions,
                                         absl::Span<float> out) const {
  for (size_t b = 0; b < states.size(); ++b) {
    TWICE_RETURN_IF_ERROR(ValidateState(*states[b], positions[b]));
  }
  return ffn_->Forward(x, static_cast<int64_t>(states.size()), out);
}

}  // namespace twice::engine
