#include "kernels/taylor_linear_attention.h"

#include <vector>

#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/linear_attention.h"
#include "kernels/prefix_linear_attention.h"
#include "kernels/status_macros.h"
#include "kernels/taylor_feature_map.h"

namespace twice::kernels {
namespace {

// The op as its two entry points: each may still run on the backend.
absl::Status Composed(absl::Span<const float> q, absl::Span<const float> k,
                      absl::Span<const float> v, int64_t tokens,
                      absl::Span<const float> k_enc,
                      absl::Span<const float> v_enc, int64_t encoder_tokens,
                      const TaylorAttentionDims& dims, float eps,
                      absl::Span<float> kv_state, absl::Span<float> k_state,
                      absl::Span<float> y) {
  const int64_t h = dims.heads, f = dims.feature_dim;
  const int64_t width = TaylorFeatureDim(f);
  std::vector<float> phi_q(tokens * h * width), phi_k(tokens * h * width);
  std::vector<float> phi_ke(encoder_tokens * h * width);
  TWICE_RETURN_IF_ERROR(
      TaylorFeatureMap(q, tokens * h, f, absl::MakeSpan(phi_q)));
  TWICE_RETURN_IF_ERROR(
      TaylorFeatureMap(k, tokens * h, f, absl::MakeSpan(phi_k)));
  TWICE_RETURN_IF_ERROR(
      TaylorFeatureMap(k_enc, encoder_tokens * h, f, absl::MakeSpan(phi_ke)));
  const LinearAttentionDims featurized{h, dims.head_dim, width};
  if (tokens == 1 && encoder_tokens == 0) {
    // The recurrent step: a decode step reads exactly as before this op.
    return LinearAttentionStep(phi_q, phi_k, v, featurized, eps, kv_state,
                               k_state, y);
  }
  return PrefixLinearAttentionPrefill(phi_q, phi_k, v, tokens, phi_ke, v_enc,
                                      encoder_tokens, featurized, eps, kv_state,
                                      k_state, y);
}

}  // namespace

absl::Status TaylorLinearAttention(
    absl::Span<const float> q, absl::Span<const float> k,
    absl::Span<const float> v, int64_t tokens, absl::Span<const float> k_enc,
    absl::Span<const float> v_enc, int64_t encoder_tokens,
    const TaylorAttentionDims& dims, float eps, absl::Span<float> kv_state,
    absl::Span<float> k_state, absl::Span<float> y) {
  constexpr char kOp[] = "TaylorLinearAttention";
  TWICE_RETURN_IF_ERROR(
      CheckArg(dims.heads >= 1 && dims.head_dim >= 1 && dims.feature_dim >= 1,
               kOp, "need heads, head_dim and feature_dim >= 1"));
  TWICE_RETURN_IF_ERROR(CheckArg(
      tokens >= 0 && encoder_tokens >= 0 && tokens + encoder_tokens >= 1, kOp,
      "need T >= 0, E >= 0 and T + E >= 1"));
  TWICE_RETURN_IF_ERROR(CheckArg(eps >= 0.0f, kOp, "eps must be >= 0"));
  const int64_t hf = dims.heads * dims.feature_dim;
  const int64_t hv = dims.heads * dims.head_dim;
  const int64_t width = TaylorFeatureDim(dims.feature_dim);
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "q", q.size(), tokens * hf));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "k", k.size(), tokens * hf));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "v", v.size(), tokens * hv));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "k_enc", k_enc.size(), encoder_tokens * hf));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "v_enc", v_enc.size(), encoder_tokens * hv));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "kv_state", kv_state.size(), hv * width));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "k_state", k_state.size(), dims.heads * width));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y.size(), tokens * hv));
  return Dispatch(
      [&](KernelBackend& b) {
        return b.TaylorLinearAttention(q, k, v, tokens, k_enc, v_enc,
                                       encoder_tokens, dims, eps, kv_state,
                                       k_state, y);
      },
      [&] {
        return Composed(q, k, v, tokens, k_enc, v_enc, encoder_tokens, dims,
                        eps, kv_state, k_state, y);
      });
}

}  // namespace twice::kernels
