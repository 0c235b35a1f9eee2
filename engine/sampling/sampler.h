// Sampler: picks the next token of one generation from its logits. Greedy
// when temperature is 0; otherwise temperature, then top-k, then top-p, as
// kernels/sampling.h defines them. The draw of the n-th sampled token is a
// pure function of (seed, n) (kernels/sampling_uniform.h), so an answer is
// reproducible from its seed whether its sequence ran alone, in a decode
// batch or on a device.
#ifndef TWICE_ENGINE_SAMPLING_SAMPLER_H_
#define TWICE_ENGINE_SAMPLING_SAMPLER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/sampling.h"

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
  explicit Sampler(const SamplingParams& params) : params_(params) {}

  // The rule of the next token: the params with the index of the token
  // within this generation. The caller samples with it (kernels::SampleRows,
  // possibly batched with other sequences) and then calls Advance.
  kernels::SamplingRule NextRule() const;
  void Advance() { ++draws_; }

  // NextRule, one row of SampleRows among the first `vocab_size` logits
  // (the padding rows of the embedding are never sampled), then Advance.
  // An empty row leaves nothing to pick but id 0. Errors are the kernel's
  // (a device fault; the params were validated when accepted).
  [[nodiscard]] absl::StatusOr<int32_t> Sample(absl::Span<const float> logits,
                                               int32_t vocab_size);

 private:
  SamplingParams params_;
  uint64_t draws_ = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_SAMPLING_SAMPLER_H_
