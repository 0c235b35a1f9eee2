#include "kernels/attention_decode.h"

#include <cstdint>
#include <memory>

#include "kernels/backend.h"
#include "kernels/paged_attention.h"

namespace twice::kernels {

absl::Status CausalGqaAttention(absl::Span<const float> q, int64_t q_stride,
                                absl::Span<const float> k,
                                absl::Span<const float> v,
                                const CausalAttentionDims& dims, float scale,
                                absl::Span<float> out) {
  const int64_t t = dims.tokens, p = dims.past, h = dims.heads,
                hkv = dims.kv_heads, hd = dims.head_dim;
  if (t < 0 || p < 0 || h < 1 || hkv < 1 || hd < 1 || h % hkv != 0 ||
      q_stride < h * hd) {
    return absl::InvalidArgumentError("CausalGqaAttention: bad dimensions");
  }
  const int64_t ctx = p + t;
  const int64_t kv_row = hkv * hd;
  if ((t > 0 && static_cast<int64_t>(q.size()) < (t - 1) * q_stride + h * hd) ||
      static_cast<int64_t>(k.size()) != ctx * kv_row ||
      static_cast<int64_t>(v.size()) != ctx * kv_row ||
      static_cast<int64_t>(out.size()) != t * h * hd) {
    return absl::InvalidArgumentError("CausalGqaAttention: span size mismatch");
  }
  if (t == 0) return absl::OkStatus();
  if (std::shared_ptr<KernelBackend> backend = ActiveKernelBackend()) {
    absl::Status status =
        backend->CausalGqaAttention(q, q_stride, k, v, dims, scale, out);
    if (!absl::IsUnimplemented(status)) return status;
  }
  // The contiguous cache is a paged one of a single block: one kernel
  // serves both (rows in parallel, a short batch's positions split).
  const int32_t only_block = 0;
  return PagedCausalAttention(
      q, q_stride, PagedRows{t, p, {}},
      PagedKvDims{h, hkv, hd, /*block_size=*/ctx, /*table_width=*/1},
      absl::MakeConstSpan(&only_block, 1), k, v, scale, out);
}

}  // namespace twice::kernels
