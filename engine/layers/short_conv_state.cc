#include "engine/layers/short_conv_state.h"

#include "engine/state/state_io.h"

namespace twice::engine {

ShortConvState::ShortConvState(int64_t kernel_size, int64_t channels)
    : kernel_size_(kernel_size),
      channels_(channels),
      tail_((kernel_size - 1) * channels, 0.0f) {}

int64_t ShortConvState::ByteSize() const {
  return CountBytes([this](StateWriter& w) { Serialize(w); });
}

std::unique_ptr<LayerState> ShortConvState::Clone() const {
  return std::make_unique<ShortConvState>(*this);
}

void ShortConvState::Serialize(StateWriter& writer) const {
  writer.WriteTensor({kernel_size_ - 1, channels_}, tail_);
}

absl::Status ShortConvState::Deserialize(StateReader& reader) {
  return reader.ReadTensor({kernel_size_ - 1, channels_}, absl::MakeSpan(tail_),
                           "short_conv tail");
}

}  // namespace twice::engine
