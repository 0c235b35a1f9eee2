// CausalConv1d: depthwise causal 1-D convolution with a carried tail.
//
// With kernel width K, channels C, and the K-1 inputs that preceded this
// call held in `tail` (time-ordered, zeros for a fresh sequence), let
// u = concat(tail, x) along time ([K-1+T, C]). Then for t in [0, T):
//   out[t, c] = sum_{j=0..K-1} w[c, j] · u[t + j, c]
// i.e. tap j = K-1 multiplies the current token and tap 0 the token K-1
// steps back (PyTorch Conv1d(groups=C, padding=K-1) truncated to T outputs).
// Afterwards tail = the last K-1 rows of u, so a sequence split anywhere
// gives the same outputs as one call over the whole of it. No bias.
//
// Layouts (row-major): x [T, C] with row stride x_stride >= C (x may be a
// column range of a wider matrix); w [C, K] (the [C, 1, K] PyTorch weight);
// tail [K-1, C] (in/out); out [T, C] contiguous.
#ifndef TWICE_KERNELS_CAUSAL_CONV1D_H_
#define TWICE_KERNELS_CAUSAL_CONV1D_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::kernels {

[[nodiscard]] absl::Status CausalConv1d(
    absl::Span<const float> x, int64_t tokens, int64_t channels,
    int64_t x_stride, absl::Span<const float> weight, int64_t kernel_size,
    absl::Span<float> tail, absl::Span<float> out);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_CAUSAL_CONV1D_H_
