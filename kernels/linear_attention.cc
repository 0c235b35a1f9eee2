#include "kernels/linear_attention.h"

#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/status_macros.h"

namespace twice::kernels {
namespace {

[[nodiscard]] absl::Status CheckDims(
    const char* op, int64_t tokens, const LinearAttentionDims& d,
    absl::Span<const float> phi_q, absl::Span<const float> phi_k,
    absl::Span<const float> v, absl::Span<float> kv_state,
    absl::Span<float> k_state, absl::Span<float> y) {
  TWICE_RETURN_IF_ERROR(CheckArg(
      d.heads >= 1 && d.head_dim >= 1 && d.feature_size >= 1 && tokens >= 0, op,
      "need heads, head_dim, feature_size >= 1"));
  TWICE_RETURN_IF_ERROR(
      CheckSize(op, "phi_q", phi_q.size(), tokens * d.heads * d.feature_size));
  TWICE_RETURN_IF_ERROR(
      CheckSize(op, "phi_k", phi_k.size(), tokens * d.heads * d.feature_size));
  TWICE_RETURN_IF_ERROR(
      CheckSize(op, "v", v.size(), tokens * d.heads * d.head_dim));
  TWICE_RETURN_IF_ERROR(CheckSize(op, "kv_state", kv_state.size(),
                                  d.heads * d.head_dim * d.feature_size));
  TWICE_RETURN_IF_ERROR(
      CheckSize(op, "k_state", k_state.size(), d.heads * d.feature_size));
  return CheckSize(op, "y", y.size(), tokens * d.heads * d.head_dim);
}

}  // namespace

absl::Status LinearAttentionPrefill(absl::Span<const float> phi_q,
                                    absl::Span<const float> phi_k,
                                    absl::Span<const float> v, int64_t tokens,
                                    const LinearAttentionDims& dims, float eps,
                                    absl::Span<float> kv_state,
                                    absl::Span<float> k_state,
                                    absl::Span<float> y) {
  TWICE_RETURN_IF_ERROR(CheckDims("LinearAttentionPrefill", tokens, dims, phi_q,
                                  phi_k, v, kv_state, k_state, y));
  if (tokens == 0) return absl::OkStatus();
  return Dispatch(
      [&](KernelBackend& b) {
        return b.PrefixLinearAttentionPrefill(phi_q, phi_k, v, tokens, {}, {},
                                              0, dims, eps, kv_state, k_state,
                                              y);
      },
      [&] {
        cpu::LinearAttentionPrefill(phi_q.data(), phi_k.data(), v.data(),
                                    tokens, dims.heads, dims.head_dim,
                                    dims.feature_size, eps, kv_state.data(),
                                    k_state.data(), y.data());
        return absl::OkStatus();
      });
}

absl::Status LinearAttentionStep(absl::Span<const float> phi_q,
                                 absl::Span<const float> phi_k,
                                 absl::Span<const float> v,
                                 const LinearAttentionDims& dims, float eps,
                                 absl::Span<float> kv_state,
                                 absl::Span<float> k_state,
                                 absl::Span<float> y) {
  TWICE_RETURN_IF_ERROR(CheckDims("LinearAttentionStep", 1, dims, phi_q, phi_k,
                                  v, kv_state, k_state, y));
  return Dispatch(
      [&](KernelBackend& b) {
        return b.PrefixLinearAttentionPrefill(phi_q, phi_k, v, 1, {}, {}, 0,
                                              dims, eps, kv_state, k_state, y);
      },
      [&] {
        cpu::LinearAttentionStep(
            phi_q.data(), phi_k.data(), v.data(), dims.heads, dims.head_dim,
            dims.feature_size, eps, kv_state.data(), k_state.data(), y.data());
        return absl::OkStatus();
      });
}

}  // namespace twice::kernels
