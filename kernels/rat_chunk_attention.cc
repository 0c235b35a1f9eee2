#include "kernels/rat_chunk_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/simd.h"

namespace twice::kernels {
namespace {

bool Fits(const StridedRows& r, int64_t rows, int64_t width) {
  if (r.stride < width) return false;
  return rows == 0 ||
         static_cast<int64_t>(r.data.size()) >= (rows - 1) * r.stride + width;
}

inline float Dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t e = 0; e < n; ++e) s += a[e] * b[e];
  return s;
}

}  // namespace

TWICE_CPU_CLONES
absl::Status RatChunkAttention(StridedRows q, StridedRows own_k,
                               StridedRows own_v, StridedRows chunk_k,
                               StridedRows chunk_v,
                               absl::Span<const int64_t> visible,
                               const RatAttentionDims& dims, float scale,
                               absl::Span<float> out) {
  const int64_t t = dims.tokens, c = dims.chunks, h = dims.heads,
                hd = dims.head_dim, d = h * hd;
  if (t < 0 || c < 0 || h < 1 || hd < 1 || !Fits(q, t, d) ||
      !Fits(own_k, t, d) || !Fits(own_v, t, d) || !Fits(chunk_k, c, d) ||
      !Fits(chunk_v, c, d) || static_cast<int64_t>(visible.size()) != t ||
      static_cast<int64_t>(out.size()) != t * d) {
    return absl::InvalidArgumentError("RatChunkAttention: size mismatch");
  }
  for (int64_t n : visible) {
    if (n < 0 || n > c) {
      return absl::InvalidArgumentError(
          "RatChunkAttention: visible chunk count out of range");
    }
  }
  if (t == 0) return absl::OkStatus();
  if (std::shared_ptr<KernelBackend> backend = ActiveKernelBackend()) {
    absl::Status status = backend->RatChunkAttention(
        q, own_k, own_v, chunk_k, chunk_v, visible, dims, scale, out);
    if (!absl::IsUnimplemented(status)) return status;
  }
  std::vector<float> s(c + 1);
  for (int64_t i = 0; i < t; ++i) {
    const int64_t n = visible[i];
    for (int64_t head = 0; head < h; ++head) {
      const int64_t off = head * hd;
      const float* qi = q.data.data() + i * q.stride + off;
      // s[0..n) closed chunks, s[n] the token's own running key.
      float m = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        s[j] =
            scale * Dot(qi, chunk_k.data.data() + j * chunk_k.stride + off, hd);
        m = std::max(m, s[j]);
      }
      s[n] = scale * Dot(qi, own_k.data.data() + i * own_k.stride + off, hd);
      m = std::max(m, s[n]);
      float sum = 0.0f;
      for (int64_t j = 0; j <= n; ++j) {
        s[j] = std::exp(s[j] - m);
        sum += s[j];
      }
      const float inv = 1.0f / sum;
      float* o = out.data() + i * d + off;
      const float* vi = own_v.data.data() + i * own_v.stride + off;
      for (int64_t e = 0; e < hd; ++e) o[e] = s[n] * inv * vi[e];
      for (int64_t j = 0; j < n; ++j) {
        const float w = s[j] * inv;
        const float* vj = chunk_v.data.data() + j * chunk_v.stride + off;
#pragma omp simd
        for (int64_t e = 0; e < hd; ++e) o[e] += w * vj[e];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace twice::kernels
