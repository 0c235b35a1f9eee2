// FeedForwardMixer: a position-wise FeedForward standing in a mixer's place,
// for stacks whose MLPs are layers of their own (Nemotron-H's "-" layers:
// x += MLP(RMSNorm(x)), with no attention or SSM in the layer). Its state
// is a StatelessState; rows are independent, so a prefill chunk and a batch
// of decode rows are the same call.
#ifndef TWICE_ENGINE_LAYERS_FEED_FORWARD_MIXER_H_
#define TWICE_ENGINE_LAYERS_FEED_FORWARD_MIXER_H_

#include <cstdint>
#include <memory>
#include <utility>

#include "engine/layers/feed_forward.h"
#include "engine/layers/mixer.h"

namespace twice::engine {

class FeedForwardMixer final : public Mixer {
 public:
  explicit FeedForwardMixer(std::unique_ptr<FeedForward> ffn)
      : ffn_(std::move(ffn)) {}

  std::unique_ptr<LayerState> NewState() const override;
  // FAILED_PRECONDITION unless `state` is a StatelessState.
  [[nodiscard]] absl::Status ValidateState(LayerState& state,
                                           int64_t start_pos) const override;
  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     int64_t start_pos, LayerState& state,
                                     absl::Span<float> out) const override;
  [[nodiscard]] absl::Status StepBatch(absl::Span<const float> x,
                                       absl::Span<LayerState* const> states,
                                       absl::Span<const int64_t> positions,
                                       absl::Span<float> out) const override;

  const FeedForward& ffn() const { return *ffn_; }

 private:
  std::unique_ptr<FeedForward> ffn_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_FEED_FORWARD_MIXER_H_
