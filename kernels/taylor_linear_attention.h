// TaylorLinearAttention: Based's / JRT-RNN's linear-attention core as one
// op from raw (pre-feature-map) queries and keys: the Taylor feature map
// (taylor_feature_map.h) of q, k and the encoder keys, then
// PrefixLinearAttentionPrefill (prefix_linear_attention.h, whose equations
// and state layouts it shares; E = 0 is a causal read, and T = 1 with E = 0
// is LinearAttentionStep). One op lets a device run its fused kernel, which
// featurizes inside and never stores the D = 1 + F + F^2 wide features;
// a backend that has no kernel for the shape declines it, and the op then
// runs as the two entry points it is made of (each dispatched on its own).
//
// Layouts (row-major, contiguous): q, k [T, H, F]; v, y [T, H, hd];
// k_enc [E, H, F]; v_enc [E, H, hd]; kv_state [H, hd, D]; k_state [H, D].
#ifndef TWICE_KERNELS_TAYLOR_LINEAR_ATTENTION_H_
#define TWICE_KERNELS_TAYLOR_LINEAR_ATTENTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::kernels {

struct TaylorAttentionDims {
  int64_t heads = 0;        // H
  int64_t head_dim = 0;     // hd
  int64_t feature_dim = 0;  // F (the state's width is D = 1 + F + F^2)
};

// INVALID_ARGUMENT when a span's size does not match the dimensions, T < 0,
// E < 0 or T = E = 0.
[[nodiscard]] absl::Status TaylorLinearAttention(
    absl::Span<const float> q, absl::Span<const float> k,
    absl::Span<const float> v, int64_t tokens, absl::Span<const float> k_enc,
    absl::Span<const float> v_enc, int64_t encoder_tokens,
    const TaylorAttentionDims& dims, float eps, absl::Span<float> kv_state,
    absl::Span<float> k_state, absl::Span<float> y);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_TAYLOR_LINEAR_ATTENTION_H_
