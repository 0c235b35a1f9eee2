#include "kernels/window_attention.h"

#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/status_macros.h"

namespace twice::kernels {

absl::Status WindowAttention(absl::Span<const float> q, int64_t q_stride,
                             absl::Span<const float> k,
                             absl::Span<const float> v,
                             const WindowAttentionDims& dims, float scale,
                             absl::Span<float> out) {
  constexpr char kOp[] = "WindowAttention";
  const int64_t width = dims.heads * dims.head_dim;
  TWICE_RETURN_IF_ERROR(CheckArg(dims.tokens >= 0 && dims.past >= 0 &&
                                     dims.heads >= 1 && dims.head_dim >= 1 &&
                                     dims.window >= 0,
                                 kOp,
                                 "need tokens, past, window >= 0 and "
                                 "heads, head_dim >= 1"));
  TWICE_RETURN_IF_ERROR(
      CheckArg(q_stride >= width, kOp, "q_stride < heads * head_dim"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "q", q.size(), StridedExtent(dims.tokens, width, q_stride)));
  const int64_t context = dims.past + dims.tokens;
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "k", k.size(), context * width));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "v", v.size(), context * width));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size(), dims.tokens * width));
  if (dims.tokens == 0) return absl::OkStatus();
  return Dispatch(
      [&](KernelBackend& b) {
        return b.WindowAttention(q, q_stride, k, v, dims, scale, out);
      },
      [&] {
        cpu::WindowAttention(q.data(), q_stride, k.data(), v.data(),
                             dims.tokens, dims.past, dims.heads, dims.head_dim,
                             dims.window, scale, out.data());
        return absl::OkStatus();
      });
}

}  // namespace twice::kernels
