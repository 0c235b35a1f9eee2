#include "engine/layers/window_kv_state.h"

#include "absl/strings/str_cat.h"
#include "engine/state/state_io.h"
#include "kernels/status_macros.h"

namespace twice::engine {

WindowKvState::WindowKvState(int64_t capacity, int64_t heads, int64_t head_dim)
    : capacity_(capacity),
      heads_(heads),
      head_dim_(head_dim),
      keys_(capacity * heads * head_dim, 0.0f),
      values_(capacity * heads * head_dim, 0.0f) {}

int64_t WindowKvState::ByteSize() const {
  return CountBytes([this](StateWriter& w) { Serialize(w); });
}

std::unique_ptr<LayerState> WindowKvState::Clone() const {
  return std::make_unique<WindowKvState>(*this);
}

void WindowKvState::Serialize(StateWriter& writer) const {
  writer.WriteI64(count_);
  writer.WriteTensor({capacity_, heads_, head_dim_}, keys_);
  writer.WriteTensor({capacity_, heads_, head_dim_}, values_);
}

absl::Status WindowKvState::Deserialize(StateReader& reader) {
  TWICE_ASSIGN_OR_RETURN(int64_t count, reader.ReadI64());
  if (count < 0) {
    return absl::DataLossError(
        absl::StrCat("sliding_window token count ", count, " is negative"));
  }
  TWICE_RETURN_IF_ERROR(reader.ReadTensor({capacity_, heads_, head_dim_},
                                          absl::MakeSpan(keys_),
                                          "sliding_window keys"));
  TWICE_RETURN_IF_ERROR(reader.ReadTensor({capacity_, heads_, head_dim_},
                                          absl::MakeSpan(values_),
                                          "sliding_window values"));
  count_ = count;
  return absl::OkStatus();
}

}  // namespace twice::engine
