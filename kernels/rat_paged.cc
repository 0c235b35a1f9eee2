#include "kernels/rat_paged.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/rope.h"
#include "kernels/status_macros.h"

namespace twice::kernels {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

int64_t RowPosition(const PagedRows& rows, int64_t r) {
  return rows.positions.empty() ? rows.start + r : rows.positions[r];
}
int64_t RowTable(const PagedRows& rows, int64_t r) {
  return rows.positions.empty() ? 0 : r;
}

// Pool row of chunk c of table row `trow`.
int64_t ChunkRow(const RatPagedDims& dims, absl::Span<const int32_t> table,
                 int64_t trow, int64_t c) {
  return int64_t{table[trow * dims.table_width + c / dims.block_size]} *
             dims.block_size +
         c % dims.block_size;
}

}  // namespace

absl::Status CheckRatPagedRows(const PagedRows& rows, const RatPagedDims& dims,
                               absl::Span<const int32_t> table,
                               int64_t closed_floats) {
  constexpr char kOp[] = "RatPaged";
  TWICE_RETURN_IF_ERROR(CheckArg(
      dims.dim >= 2 && dims.heads >= 1 && dims.dim % dims.heads == 0 &&
          dims.head_dim() % 2 == 0 && dims.groups >= 1 &&
          dims.heads % dims.groups == 0 && dims.chunk_size >= 1 &&
          dims.block_size >= 1 && dims.table_width >= 1 &&
          dims.rope_base > 0.0f,
      kOp,
      "need even head dims, G | H, chunk_size, block_size, table width >= 1 "
      "and rope_base > 0"));
  // Chunks [0, (p + 1) / L): the ones p sees and the one it may close.
  return CheckTableReach(kOp, rows, dims.block_size, dims.table_width,
                         2 * dims.dim, table, closed_floats, [&](int64_t p) {
                           const int64_t chunks = (p + 1) / dims.chunk_size;
                           return (chunks + dims.block_size - 1) /
                                  dims.block_size;
                         });
}

absl::Status RatChunkScan(absl::Span<const float> proj, int64_t proj_stride,
                          absl::Span<const float> gate_bias,
                          const PagedRows& rows,
                          absl::Span<const int32_t> slots,
                          const RatPagedDims& dims,
                          absl::Span<const int32_t> table,
                          absl::Span<float> open, absl::Span<float> closed,
                          absl::Span<float> q_out, absl::Span<float> k_out,
                          absl::Span<float> v_out, absl::Span<float> z_out) {
  constexpr char kOp[] = "RatChunkScan";
  TWICE_RETURN_IF_ERROR(CheckRatPagedRows(rows, dims, table,
                                          static_cast<int64_t>(closed.size())));
  const int64_t d = dims.dim, n = rows.rows;
  const int64_t w = dims.proj_width();
  TWICE_RETURN_IF_ERROR(
      CheckArg(proj_stride >= w, kOp, "proj_stride < 3D + 2 G hd"));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "proj", proj.size(), StridedExtent(n, w, proj_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "gate_bias", gate_bias.size(), d));
  for (absl::Span<float> out : {q_out, k_out, v_out, z_out}) {
    TWICE_RETURN_IF_ERROR(CheckSize(kOp, "an output", out.size(), n * d));
  }
  TWICE_RETURN_IF_ERROR(
      CheckArg(open.size() % (2 * d) == 0, kOp, "open is not [slots, 2, D]"));
  const int64_t capacity = static_cast<int64_t>(open.size()) / (2 * d);
  const int64_t slot_rows = rows.positions.empty() ? (n > 0 ? 1 : 0) : n;
  TWICE_RETURN_IF_ERROR(
      CheckArg(static_cast<int64_t>(slots.size()) == slot_rows, kOp,
               "need one slot per row (one for a prefill pass)"));
  std::vector<bool> seen(static_cast<size_t>(capacity), false);
  for (int32_t s : slots) {
    TWICE_RETURN_IF_ERROR(CheckArg(s >= 0 && s < capacity && !seen[s], kOp,
                                   "slots must be distinct and in range"));
    seen[s] = true;
  }
  if (n == 0) return absl::OkStatus();
  const int64_t qk = dims.groups * dims.head_dim();
  const int64_t l_len = dims.chunk_size;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t p = RowPosition(rows, r);
    const bool first = p % l_len == 0;
    const float* row = proj.data() + r * proj_stride;
    const float* zt = row;
    const float* v = row + d;
    const float* gt = row + 2 * d;
    const float* qt = row + 3 * d;
    const float* kt = row + 3 * d + qk;
    float* rk = open.data() + slots[rows.positions.empty() ? 0 : r] * 2 * d;
    float* rv = rk + d;
    float* q = q_out.data() + r * d;
    float* k = k_out.data() + r * d;
    for (int64_t j = 0; j < d; ++j) {
      const float g = Sigmoid(gt[j] + gate_bias[j]);
      const float kj = kt[j % qk];  // groups tiled over the heads
      rk[j] = first ? (1.0f - g) * kj : g * rk[j] + (1.0f - g) * kj;
      rv[j] = first ? (1.0f - g) * v[j] : g * rv[j] + (1.0f - g) * v[j];
      q[j] = qt[j % qk];
      z_out[r * d + j] = Sigmoid(zt[j]);
    }
    std::copy(rk, rk + d, k);
    std::copy(rv, rv + d, v_out.data() + r * d);
    const int64_t c = p / l_len;
    TWICE_RETURN_IF_ERROR(RopeRotateHalf(absl::MakeSpan(q, d), 1, d, dims.heads,
                                         dims.head_dim(), c, dims.rope_base));
    TWICE_RETURN_IF_ERROR(RopeRotateHalf(absl::MakeSpan(k, d), 1, d, dims.heads,
                                         dims.head_dim(), c, dims.rope_base));
    if (p % l_len == l_len - 1) {
      float* chunk =
          closed.data() + ChunkRow(dims, table, RowTable(rows, r), c) * 2 * d;
      std::copy(k, k + d, chunk);
      std::copy(rv, rv + d, chunk + d);
    }
  }
  return absl::OkStatus();
}

absl::Status RatPagedAttention(absl::Span<const float> q,
                               absl::Span<const float> own_k,
                               absl::Span<const float> own_v,
                               absl::Span<const float> z, const PagedRows& rows,
                               const RatPagedDims& dims,
                               absl::Span<const int32_t> table,
                               absl::Span<const float> closed, float scale,
                               absl::Span<float> out) {
  constexpr char kOp[] = "RatPagedAttention";
  TWICE_RETURN_IF_ERROR(CheckRatPagedRows(rows, dims, table,
                                          static_cast<int64_t>(closed.size())));
  const int64_t d = dims.dim, n = rows.rows;
  for (absl::Span<const float> in : {q, own_k, own_v, z}) {
    TWICE_RETURN_IF_ERROR(CheckSize(kOp, "an input", in.size(), n * d));
  }
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size(), n * d));
  if (n == 0) return absl::OkStatus();
  const int64_t h = dims.heads, hd = dims.head_dim();
  // Work items are (row, head) pairs; each owns its scores.
  cpu::ParallelFor(n * h, [&](int64_t item) {
    const int64_t r = item / h, head = item % h;
    const int64_t seen = RowPosition(rows, r) / dims.chunk_size;
    const int64_t off = r * d + head * hd;
    thread_local std::vector<float> s;
    s.resize(static_cast<size_t>(seen + 1));
    auto dot = [hd](const float* a, const float* b) {
      float acc = 0.0f;
      for (int64_t e = 0; e < hd; ++e) acc += a[e] * b[e];
      return acc;
    };
    const float* qh = q.data() + off;
    float m = -INFINITY;
    for (int64_t c = 0; c <= seen; ++c) {
      const float* key =
          c < seen ? closed.data() +
                         ChunkRow(dims, table, RowTable(rows, r), c) * 2 * d +
                         head * hd
                   : own_k.data() + off;
      s[c] = dot(qh, key) * scale;
      m = std::max(m, s[c]);
    }
    float sum = 0.0f;
    // As the paged attention's: negligible weights are 0, no denormals.
    for (int64_t c = 0; c <= seen; ++c) {
      s[c] = s[c] - m < cpu::kNegligibleSoftmaxExponent ? 0.0f
                                                        : std::exp(s[c] - m);
      sum += s[c];
    }
    float* o = out.data() + off;
    std::fill(o, o + hd, 0.0f);
    for (int64_t c = 0; c <= seen; ++c) {
      const float* value =
          c < seen ? closed.data() +
                         ChunkRow(dims, table, RowTable(rows, r), c) * 2 * d +
                         d + head * hd
                   : own_v.data() + off;
      const float wgt = s[c] / sum;
      for (int64_t e = 0; e < hd; ++e) o[e] += wgt * value[e];
    }
    for (int64_t e = 0; e < hd; ++e) o[e] *= z[off + e];
  });
  return absl::OkStatus();
}

}  // namespace twice::kernels
