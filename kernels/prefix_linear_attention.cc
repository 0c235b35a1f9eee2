#include "kernels/prefix_linear_attention.h"

#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/cpu/prefix_linear_attention_cpu.h"
#include "kernels/status_macros.h"

namespace twice::kernels {

absl::Status PrefixLinearAttentionPrefill(
    absl::Span<const float> phi_q, absl::Span<const float> phi_k,
    absl::Span<const float> v, int64_t tokens,
    absl::Span<const float> phi_k_enc, absl::Span<const float> v_enc,
    int64_t encoder_tokens, const LinearAttentionDims& dims, float eps,
    absl::Span<float> kv_state, absl::Span<float> k_state,
    absl::Span<float> y) {
  constexpr char kOp[] = "PrefixLinearAttentionPrefill";
  const LinearAttentionDims& d = dims;
  TWICE_RETURN_IF_ERROR(CheckArg(d.heads >= 1 && d.head_dim >= 1 &&
                                     d.feature_size >= 1 && tokens >= 0 &&
                                     encoder_tokens >= 0,
                                 kOp,
                                 "need heads, head_dim, feature_size >= 1 and "
                                 "tokens, encoder_tokens >= 0"));
  const int64_t qk_row = d.heads * d.feature_size;
  const int64_t v_row = d.heads * d.head_dim;
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "phi_q", phi_q.size(), tokens * qk_row));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "phi_k", phi_k.size(), tokens * qk_row));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "v", v.size(), tokens * v_row));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "phi_k_enc", phi_k_enc.size(), encoder_tokens * qk_row));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "v_enc", v_enc.size(), encoder_tokens * v_row));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "kv_state", kv_state.size(), v_row * d.feature_size));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "k_state", k_state.size(), qk_row));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y.size(), tokens * v_row));
  if (tokens == 0 && encoder_tokens == 0) return absl::OkStatus();
  return Dispatch(
      [&](KernelBackend& b) {
        return b.PrefixLinearAttentionPrefill(phi_q, phi_k, v, tokens,
                                              phi_k_enc, v_enc, encoder_tokens,
                                              dims, eps, kv_state, k_state, y);
      },
      [&] {
        cpu::PrefixLinearAttentionPrefill(
            phi_q.data(), phi_k.data(), v.data(), tokens, phi_k_enc.data(),
            v_enc.data(), encoder_tokens, d.heads, d.head_dim, d.feature_size,
            eps, kv_state.data(), k_state.data(), y.data());
        return absl::OkStatus();
      });
}

}  // namespace twice::kernels
