#include "engine/state/sequence_state.h"

namespace twice::engine {

int64_t SequenceState::ByteSize() const {
  int64_t total = 0;
  for (const auto& layer : layers_) total += layer->ByteSize();
  return total;
}

std::unique_ptr<SequenceState> SequenceState::Clone() const {
  std::vector<std::unique_ptr<LayerState>> layers;
  layers.reserve(layers_.size());
  for (const auto& layer : layers_) layers.push_back(layer->Clone());
  auto copy = std::make_unique<SequenceState>(fingerprint_, std::move(layers));
  copy->set_token_count(token_count_);
  copy->damaged_ = damaged_;
  return copy;
}

}  // namespace twice::engine
