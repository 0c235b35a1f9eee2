#include "engine/layers/mixer.h"

#include "kernels/status_macros.h"

namespace twice::engine {

absl::Status Mixer::StepBatch(absl::Span<const float> x,
                              absl::Span<LayerState* const> states,
                              absl::Span<const int64_t> positions,
                              absl::Span<float> out) const {
  const int64_t rows = static_cast<int64_t>(states.size());
  if (rows == 0 || positions.size() != states.size() ||
      x.size() % static_cast<size_t>(rows) != 0 || out.size() != x.size()) {
    return absl::InvalidArgumentError(
        "Mixer::StepBatch: x, out, states and positions disagree on the batch");
  }
  const size_t d = x.size() / static_cast<size_t>(rows);
  for (int64_t b = 0; b < rows; ++b) {
    TWICE_RETURN_IF_ERROR(Forward(x.subspan(b * d, d), 1, positions[b],
                                  *states[b], out.subspan(b * d, d)));
  }
  return absl::OkStatus();
}

}  // namespace twice::engine
