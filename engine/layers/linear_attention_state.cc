#include "engine/layers/linear_attention_state.h"

#include "engine/state/state_io.h"
#include "kernels/status_macros.h"

namespace twice::engine {

LinearAttentionState::LinearAttentionState(int64_t heads, int64_t head_dim,
                                           int64_t feature_size)
    : heads_(heads),
      head_dim_(head_dim),
      feature_size_(feature_size),
      kv_(heads * head_dim * feature_size, 0.0f),
      k_sum_(heads * feature_size, 0.0f) {}

int64_t LinearAttentionState::ByteSize() const {
  return CountBytes([this](StateWriter& w) { Serialize(w); });
}

std::unique_ptr<LayerState> LinearAttentionState::Clone() const {
  return std::make_unique<LinearAttentionState>(*this);
}

void LinearAttentionState::Serialize(StateWriter& writer) const {
  writer.WriteTensor({heads_, head_dim_, feature_size_}, kv_);
  writer.WriteTensor({heads_, feature_size_}, k_sum_);
}

absl::Status LinearAttentionState::Deserialize(StateReader& reader) {
  TWICE_RETURN_IF_ERROR(reader.ReadTensor({heads_, head_dim_, feature_size_},
                                          absl::MakeSpan(kv_),
                                          "linear_attention kv"));
  return reader.ReadTensor({heads_, feature_size_}, absl::MakeSpan(k_sum_),
                           "linear_attention k");
}

}  // namespace twice::engine
