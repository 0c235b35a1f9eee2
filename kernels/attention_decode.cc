#include "kernels/attention_decode.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/simd.h"

namespace twice::kernels {

namespace {

// One query row against context rows [0, visible): keys outer, heads inner,
// so K and V stream through memory once in address order (the cache of a
// long decode is far larger than the caches). s: [H, visible] scratch.
TWICE_CPU_CLONES
void AttendRow(const float* q, const float* k, const float* v, int64_t visible,
               int64_t h, int64_t hkv, int64_t hd, float scale, float* s,
               float* out) {
  const int64_t group = h / hkv, kv_row = hkv * hd;
  for (int64_t j = 0; j < visible; ++j) {
    const float* kj = k + j * kv_row;
    for (int64_t head = 0; head < h; ++head) {
      const float* qh = q + head * hd;
      const float* kh = kj + (head / group) * hd;
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int64_t e = 0; e < hd; ++e) dot += qh[e] * kh[e];
      s[head * visible + j] = dot * scale;
    }
  }
  for (int64_t head = 0; head < h; ++head) {
    float* sh = s + head * visible;
    float m = -INFINITY;
    for (int64_t j = 0; j < visible; ++j) m = std::max(m, sh[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j < visible; ++j) {
      sh[j] = std::exp(sh[j] - m);
      sum += sh[j];
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < visible; ++j) sh[j] *= inv;
  }
  std::fill(out, out + h * hd, 0.0f);
  for (int64_t j = 0; j < visible; ++j) {
    const float* vj = v + j * kv_row;
    for (int64_t head = 0; head < h; ++head) {
      const float w = s[head * visible + j];
      const float* vh = vj + (head / group) * hd;
      float* oh = out + head * hd;
#pragma omp simd
      for (int64_t e = 0; e < hd; ++e) oh[e] += w * vh[e];
    }
  }
}

}  // namespace

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
  std::vector<float> s(h * ctx);
  for (int64_t i = 0; i < t; ++i) {
    AttendRow(q.data() + i * q_stride, k.data(), v.data(), p + i + 1, h, hkv,
              hd, scale, s.data(), out.data() + i * h * hd);
  }
  return absl::OkStatus();
}

}  // namespace twice::kernels
