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
  // Chunk-major: each closed chunk's key row (all heads) and value row are
  // read once per token, in storage order, rather than one head at a time
  // at a stride of a whole row, so the step streams the state the way it
  // lies in memory. s[head * (c + 1) + j] holds the scores, column n the
  // token's own key.
  std::vector<float> s(static_cast<size_t>(h * (c + 1)));
  std::vector<float> inv_of(h);
  for (int64_t i = 0; i < t; ++i) {
    const int64_t n = visible[i];
    const float* qi = q.data.data() + i * q.stride;
    for (int64_t j = 0; j < n; ++j) {
      const float* kj = chunk_k.data.data() + j * chunk_k.stride;
      for (int64_t head = 0; head < h; ++head) {
        s[head * (c + 1) + j] = scale * Dot(qi + head * hd, kj + head * hd, hd);
      }
    }
    const float* ki = own_k.data.data() + i * own_k.stride;
    for (int64_t head = 0; head < h; ++head) {
      float* sh = s.data() + head * (c + 1);
      sh[n] = scale * Dot(qi + head * hd, ki + head * hd, hd);
      float m = -INFINITY;
      for (int64_t j = 0; j <= n; ++j) m = std::max(m, sh[j]);
      float sum = 0.0f;
      for (int64_t j = 0; j <= n; ++j) {
        sh[j] = std::exp(sh[j] - m);
        sum += sh[j];
      }
      inv_of[head] = 1.0f / sum;
    }
    float* o = out.data() + i * d;
    const float* vi = own_v.data.data() + i * own_v.stride;
    for (int64_t head = 0; head < h; ++head) {
      const float w = s[head * (c + 1) + n] * inv_of[head];
      for (int64_t e = 0; e < hd; ++e) o[head * hd + e] = w * vi[head * hd + e];
    }
    for (int64_t j = 0; j < n; ++j) {
      const float* vj = chunk_v.data.data() + j * chunk_v.stride;
      for (int64_t head = 0; head < h; ++head) {
        const float w = s[head * (c + 1) + j] * inv_of[head];
        float* oh = o + head * hd;
        const float* vh = vj + head * hd;
#pragma omp simd
        for (int64_t e = 0; e < hd; ++e) oh[e] += w * vh[e];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace twice::kernels
