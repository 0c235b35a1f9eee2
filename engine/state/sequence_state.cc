#include "engine/state/sequence_state.h"

namespace twice::engine {

int64_t SequenceState::ByteSize() const {
  int64_t total = 0;
  for (const auto& layer : layers_) total += layer->ByteSize();
  return total;
}

absl::Status SequenceState::SyncToHost() const {
  // Neither copy of a damaged state is what its token count says (a read
  // failed partway), so nothing may save or encode it.
  if (damaged_) {
    return absl::FailedPreconditionError(
        "the state was damaged (a read or a copy from the device failed "
        "partway); read the document again");
  }
  if (!host_stale_) return absl::OkStatus();
  // The host layers are a cache of the device copy (see the header).
  absl::Status s = residency_->CopyToHost(const_cast<SequenceState&>(*this));
  if (!s.ok()) {
    damaged_ = true;
    return s;
  }
  host_stale_ = false;
  return absl::OkStatus();
}

std::unique_ptr<SequenceState> SequenceState::Clone() const {
  const bool synced = SyncToHost().ok();
  std::vector<std::unique_ptr<LayerState>> layers;
  layers.reserve(layers_.size());
  for (const auto& layer : layers_) layers.push_back(layer->Clone());
  auto copy = std::make_unique<SequenceState>(fingerprint_, std::move(layers));
  copy->set_token_count(token_count_);
  copy->damaged_ = damaged_ || !synced;
  return copy;
}

}  // namespace twice::engine
