#include "engine/layers/mamba2_state.h"

#include "engine/state/state_io.h"
#include "kernels/status_macros.h"

namespace twice::engine {

Mamba2State::Mamba2State(const Mamba2StateShape& shape)
    : shape_(shape),
      conv_tail_((shape.conv_kernel - 1) * shape.conv_dim, 0.0f),
      ssm_(shape.heads * shape.head_dim * shape.state_dim, 0.0f) {}

int64_t Mamba2State::ByteSize() const {
  return CountBytes([this](StateWriter& w) { Serialize(w); });
}

std::unique_ptr<LayerState> Mamba2State::Clone() const {
  return std::make_unique<Mamba2State>(*this);
}

void Mamba2State::Serialize(StateWriter& writer) const {
  writer.WriteTensor({shape_.conv_kernel - 1, shape_.conv_dim}, conv_tail_);
  writer.WriteTensor({shape_.heads, shape_.head_dim, shape_.state_dim}, ssm_);
}

absl::Status Mamba2State::Deserialize(StateReader& reader) {
  TWICE_RETURN_IF_ERROR(
      reader.ReadTensor({shape_.conv_kernel - 1, shape_.conv_dim},
                        absl::MakeSpan(conv_tail_), "mamba2 conv_tail"));
  return reader.ReadTensor({shape_.heads, shape_.head_dim, shape_.state_dim},
                           absl::MakeSpan(ssm_), "mamba2 ssm");
}

}  // namespace twice::engine
