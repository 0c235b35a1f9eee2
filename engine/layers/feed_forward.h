// FeedForward: the position-wise half of a block (SwiGLU for Llama, GELU for
// RAT). Rows are independent, so a batch of decode rows and a prefill chunk
// are the same call. Thread safety: weights are immutable.
#ifndef TWICE_ENGINE_LAYERS_FEED_FORWARD_H_
#define TWICE_ENGINE_LAYERS_FEED_FORWARD_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::engine {

class FeedForward {
 public:
  virtual ~FeedForward() = default;
  // x, out: [tokens, d].
  [[nodiscard]] virtual absl::Status Forward(absl::Span<const float> x,
                                             int64_t tokens,
                                             absl::Span<float> out) const = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_FEED_FORWARD_H_
