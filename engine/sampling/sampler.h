// Sampler: picks the next token from logits. Greedy when temperature is 0;
// otherwise temperature, then top-k, then top-p, drawn from a generator
// seeded per request so an answer is reproducible.
#ifndef TWICE_ENGINE_SAMPLING_SAMPLER_H_
#define TWICE_ENGINE_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <random>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::engine {

struct SamplingParams {
  float temperature = 0.0f;  // Default 0: greedy. Must be >= 0.
  int32_t top_k = 0;         // Default 0: no limit. Must be >= 0.
  float top_p = 1.0f;        // Default 1: no limit. Must be in (0, 1].
  uint64_t seed = 0;

  [[nodiscard]] absl::Status Validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // Samples among the first `vocab_size` logits (the padding rows of the
  // embedding are never sampled).
  int32_t Sample(absl::Span<const float> logits, int32_t vocab_size);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_SAMPLING_SAMPLER_H_
