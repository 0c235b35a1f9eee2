// Mixer: the sequence-mixing half of a block (convolution, linear attention,
// sliding-window attention, ...). Each implementation owns one LayerState
// kind and is the only code that looks inside it.
//
// Thread safety: weights are immutable; Forward may run concurrently on
// different states.
#ifndef TWICE_ENGINE_LAYERS_MIXER_H_
#define TWICE_ENGINE_LAYERS_MIXER_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/state/layer_state.h"

namespace twice::engine {

// What a prefix (JRT-RNN) prefill tells the mixers about the tokens of the
// call, which always start from an empty state (position 0).
struct PrefixEncoding {
  // M' = min(M, tokens): rows [0, M') also form the non-causal encoder.
  int64_t encoder_tokens = 0;
  // Rows [0, P) are left padding (P <= M'): prefix linear attention zeroes
  // their raw decoder and encoder keys before the feature map, as upstream
  // does. Every other mixer reads them as ordinary tokens.
  int64_t masked_tokens = 0;
};

class Mixer {
 public:
  virtual ~Mixer() = default;

  // A state for a sequence that has read no tokens.
  virtual std::unique_ptr<LayerState> NewState() const = 0;

  // The checks Forward and StepBatch make before they change anything:
  // FAILED_PRECONDITION when `state` is not this mixer's kind (shapes
  // included) or has not read exactly `start_pos` tokens. Models run it on
  // every layer before the first layer reads, so that a read is either
  // refused with no state changed or runs to its end in place (no copy of
  // the state per step).
  [[nodiscard]] virtual absl::Status ValidateState(LayerState& state,
                                                   int64_t start_pos) const = 0;

  // Reads `tokens` rows of x ([tokens, d], already normalised) that follow
  // `start_pos` earlier tokens, writes out [tokens, d] and advances `state`.
  // Fails as ValidateState does; may leave `state` modified when it fails
  // after that (a device fault), and the model then marks the sequence
  // damaged.
  [[nodiscard]] virtual absl::Status Forward(absl::Span<const float> x,
                                             int64_t tokens, int64_t start_pos,
                                             LayerState& state,
                                             absl::Span<float> out) const = 0;

  // Reads the first `tokens` rows of a sequence (start_pos 0) as a prefix
  // prefill. Only prefix linear attention treats them differently; every
  // other mixer reads them causally, pads included (pads occupy rotary
  // positions and conv taps like any token).
  [[nodiscard]] virtual absl::Status ForwardPrefix(
      absl::Span<const float> x, int64_t tokens,
      const PrefixEncoding& /*prefix*/, LayerState& state,
      absl::Span<float> out) const {
    return Forward(x, tokens, /*start_pos=*/0, state, out);
  }

  // Reads ONE token for each of B = states.size() independent sequences:
  // row b of x ([B, d], normalised) follows positions[b] earlier tokens of
  // the sequence whose state is states[b]; writes out [B, d]. Equal to B
  // calls of Forward with tokens = 1 (up to float summation order). Mixers
  // override it to run their projections as one GEMM with m = B, so the B
  // sequences share each pass over the weights, and only the recurrence is
  // per sequence. The default reads the rows one by one. Same state rules
  // as Forward.
  [[nodiscard]] virtual absl::Status StepBatch(
      absl::Span<const float> x, absl::Span<LayerState* const> states,
      absl::Span<const int64_t> positions, absl::Span<float> out) const;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_MIXER_H_
