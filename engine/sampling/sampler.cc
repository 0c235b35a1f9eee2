#include "engine/sampling/sampler.h"

#include <algorithm>

namespace twice::engine {

absl::Status SamplingParams::Validate() const {
  return kernels::ValidateSamplingRule(
      {.temperature = temperature, .top_k = top_k, .top_p = top_p});
}

kernels::SamplingRule Sampler::NextRule() const {
  return {.temperature = params_.temperature,
          .top_k = params_.top_k,
          .top_p = params_.top_p,
          .seed = params_.seed,
          .draw = draws_};
}

absl::StatusOr<int32_t> Sampler::Sample(absl::Span<const float> logits,
                                        int32_t vocab_size) {
  // A caller's bad vocab_size must not read past the logits.
  const int64_t n = std::min(static_cast<int64_t>(logits.size()),
                             static_cast<int64_t>(std::max(vocab_size, 0)));
  const kernels::SamplingRule rule = NextRule();
  Advance();
  if (n == 0) return 0;
  int32_t id = 0;
  if (absl::Status status =
          kernels::SampleRows(logits, 1, n, n, {&rule, 1}, {&id, 1});
      !status.ok()) {
    return status;
  }
  return id;
}

}  // namespace twice::engine
