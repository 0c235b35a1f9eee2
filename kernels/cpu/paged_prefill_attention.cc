#include "kernels/cpu/paged_prefill_attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace twice::kernels::cpu {
namespace {

// Rows [r0, r1) of the pass, head h.
TWICE_CPU_CLONES
void AttendTile(const float* q, int64_t q_stride, int64_t r0, int64_t r1,
                int64_t start, int64_t h, const PagedKvDims& d,
                const int32_t* blocks, const float* k_pool, const float* v_pool,
                float scale, float* out) {
  constexpr int64_t kKeys = kPrefillTileKeys;
  const int64_t hd = d.head_dim, bs = d.block_size;
  const int64_t kv_row = d.kv_heads * hd;
  const int64_t kv_off = h / (d.heads / d.kv_heads) * hd;
  const int64_t n_rows = r1 - r0;
  // keys^T [hd, kKeys] | scores [rows, kKeys] | acc [rows, hd] | m | l
  float* keys_t = ScratchFloats(
      0, static_cast<size_t>(hd * kKeys + kPrefillTileRows * kKeys +
                             kPrefillTileRows * (hd + 2)));
  float* scores = keys_t + hd * kKeys;
  float* acc = scores + kPrefillTileRows * kKeys;
  float* m = acc + kPrefillTileRows * hd;
  float* l = m + kPrefillTileRows;
  const float* values[kKeys];
  std::fill(acc, acc + n_rows * hd, 0.0f);
  std::fill(m, m + n_rows, -INFINITY);
  std::fill(l, l + n_rows, 0.0f);
  const int64_t last = start + r1 - 1;
  for (int64_t b0 = 0; b0 <= last; b0 += kKeys) {
    const int64_t n = std::min(kKeys, last + 1 - b0);
    for (int64_t c = 0; c < n; ++c) {
      const int64_t pos = b0 + c;
      const int64_t row = int64_t{blocks[pos / bs]} * bs + pos % bs;
      const float* key = k_pool + row * kv_row + kv_off;
      for (int64_t e = 0; e < hd; ++e) keys_t[e * kKeys + c] = key[e];
      values[c] = v_pool + row * kv_row + kv_off;
    }
    // A short last block: zero keys, so the full-width scores stay finite.
    for (int64_t e = 0; n < kKeys && e < hd; ++e) {
      std::fill(keys_t + e * kKeys + n, keys_t + (e + 1) * kKeys, 0.0f);
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      // Keys b0 .. p of this row's position p.
      const int64_t visible = std::min(n, start + r0 + r - b0 + 1);
      if (visible <= 0) continue;
      float* s = scores + r * kKeys;
      // All kKeys scores at a fixed width: the accumulators stay in
      // vector registers across the hd multiply-adds.
      float dots[kKeys] = {};
      const float* qr = q + (r0 + r) * q_stride + h * hd;
      for (int64_t e = 0; e < hd; ++e) {
        const float qe = qr[e] * scale;
        const float* ke = keys_t + e * kKeys;
#pragma omp simd
        for (int64_t c = 0; c < kKeys; ++c) dots[c] += qe * ke[c];
      }
      std::copy_n(dots, visible, s);
      float top = m[r];
      for (int64_t c = 0; c < visible; ++c) top = std::max(top, s[c]);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t c = 0; c < visible; ++c) {
        const float x = s[c] - top;
        const float w = x < kNegligibleSoftmaxExponent ? 0.0f : FastExp(x);
        s[c] = w;
        sum += w;
      }
      float* a = acc + r * hd;
      if (top != m[r]) {
        // The first block of a row has nothing to rescale (m = -inf).
        const float corr = m[r] == -INFINITY ? 0.0f : std::exp(m[r] - top);
        l[r] *= corr;
        for (int64_t e = 0; e < hd; ++e) a[e] *= corr;
        m[r] = top;
      }
      l[r] += sum;
      for (int64_t c = 0; c < visible; ++c) {
        const float w = s[c];
        if (w == 0.0f) continue;
        const float* v = values[c];
#pragma omp simd
        for (int64_t e = 0; e < hd; ++e) a[e] += w * v[e];
      }
    }
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    const float inv = 1.0f / l[r];
    const float* a = acc + r * hd;
    float* o = out + ((r0 + r) * d.heads + h) * hd;
    for (int64_t e = 0; e < hd; ++e) o[e] = a[e] * inv;
  }
}

}  // namespace

void PagedPrefillAttention(const float* q, int64_t q_stride, int64_t rows,
                           int64_t start, const PagedKvDims& dims,
                           const int32_t* blocks, const float* k_pool,
                           const float* v_pool, float scale, float* out) {
  const int64_t tiles = (rows + kPrefillTileRows - 1) / kPrefillTileRows;
  ParallelFor(tiles * dims.heads, [&](int64_t item) {
    const int64_t tile = item / dims.heads, h = item % dims.heads;
    const int64_t r0 = tile * kPrefillTileRows;
    AttendTile(q, q_stride, r0, std::min(rows, r0 + kPrefillTileRows), start, h,
               dims, blocks, k_pool, v_pool, scale, out);
  });
}

}  // namespace twice::kernels::cpu
