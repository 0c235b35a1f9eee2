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

class Mixer {
 public:
  virtual ~Mixer() = default;

  // A state for a sequence that has read no tokens.
  virtual std::unique_ptr<LayerState> NewState() const = 0;

  // Reads `tokens` rows of x ([tokens, d], already normalised) that follow
  // `start_pos` earlier tokens, writes out [tokens, d] and advances `state`.
  // FAILED_PRECONDITION when `state` is not this mixer's kind or does not
  // match start_pos. May leave `state` modified on error; callers work on a
  // copy.
  [[nodiscard]] virtual absl::Status Forward(absl::Span<const float> x,
                                             int64_t tokens, int64_t start_pos,
                                             LayerState& state,
                                             absl::Span<float> out) const = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_MIXER_H_
