#include "kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/cpu/lane_vectors.h"
#include "kernels/cpu/paged_prefill_attention.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/status_macros.h"
#include "kernels/threading.h"

namespace twice::kernels {
namespace {

int64_t TableRowOf(const PagedRows& rows, int64_t r) {
  return rows.positions.empty() ? 0 : r;
}
int64_t PositionOf(const PagedRows& rows, int64_t r) {
  return rows.positions.empty() ? rows.start + r : rows.positions[r];
}

// The pool row holding position p of table row `trow`.
int64_t PoolRow(const PagedKvDims& dims, absl::Span<const int32_t> table,
                int64_t trow, int64_t p) {
  return int64_t{table[trow * dims.table_width + p / dims.block_size]} *
             dims.block_size +
         p % dims.block_size;
}

// e^x for a score x <= 0 below the row's maximum (cpu/simd.h's cutoff).
inline float SoftmaxWeight(float x) {
  return x < cpu::kNegligibleSoftmaxExponent ? 0.0f : std::exp(x);
}

// Positions whose weighted values one pass of the value loop adds into a
// head's accumulator held in registers (their rows stay in L1 between the
// head's column vectors).
constexpr int64_t kValueChunk = 16;

// oh[e] += Σ_t w[t] · v[t · stride + e] for t < tn, in t order per
// element, 16 columns at a time in a register.
inline void AddWeightedRows(const float* w, int64_t tn, const float* v,
                            int64_t stride, int64_t hd, float* oh) {
  int64_t e = 0;
  for (; e + cpu::kLanes <= hd; e += cpu::kLanes) {
    cpu::Floats16 a = cpu::Load16(oh + e);
    for (int64_t t = 0; t < tn; ++t) {
      a += w[t] * cpu::Load16(v + t * stride + e);
    }
    cpu::Store16(oh + e, a);
  }
  for (; e < hd; ++e) {
    float a = oh[e];
    for (int64_t t = 0; t < tn; ++t) a += w[t] * v[t * stride + e];
    oh[e] = a;
  }
}

// One row's attention over positions [j0, j1) of its sequence, all heads,
// unnormalised: per head the scores' maximum m, the sum l of their
// weights e^{s - m}, and acc = Σ e^{s - m} v [hd]. Keys outer, heads inner,
// so each cached row streams through memory once (a long decode's cache is
// far larger than the caches), walking the blocks in position order; the
// values in chunks of kValueChunk positions, each head's sums for a chunk
// kept in registers, added in position order (the same sums as one
// position at a time).
// s: [H, j1 - j0] scratch; m, l: [H]; acc: [H, hd].
TWICE_CPU_CLONES
void AttendPagedRange(const float* q, const PagedKvDims& dims,
                      const int32_t* blocks, int64_t j0, int64_t j1,
                      const float* k_pool, const float* v_pool, float scale,
                      float* s, float* m, float* l, float* acc) {
  const int64_t h = dims.heads, hd = dims.head_dim, bs = dims.block_size;
  const int64_t group = h / dims.kv_heads;
  const int64_t kv_row = dims.kv_heads * hd, n = j1 - j0;
  // Calls fn(row of the pool's first position, first position, count) per
  // run of [j0, j1) inside one block.
  auto for_each_run = [&](auto fn) {
    for (int64_t j = j0; j < j1;) {
      const int64_t count = std::min(bs - j % bs, j1 - j);
      fn((int64_t{blocks[j / bs]} * bs + j % bs) * kv_row, j - j0, count);
      j += count;
    }
  };
  for_each_run([&](int64_t at, int64_t first, int64_t count) {
    for (int64_t t = 0; t < count; ++t) {
      const float* kj = k_pool + at + t * kv_row;
      for (int64_t head = 0; head < h; ++head) {
        s[head * n + first + t] =
            cpu::DotByLanes(q + head * hd, kj + (head / group) * hd, hd) *
            scale;
      }
    }
  });
  for (int64_t head = 0; head < h; ++head) {
    float* sh = s + head * n;
    float mh = -INFINITY;
    for (int64_t j = 0; j < n; ++j) mh = std::max(mh, sh[j]);
    float sum = 0.0f;
    // Branch-free, so it vectorises (as the prefill tiles' weights).
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      const float x = sh[j] - mh;
      const float w =
          x < cpu::kNegligibleSoftmaxExponent ? 0.0f : cpu::FastExp(x);
      sh[j] = w;
      sum += w;
    }
    m[head] = mh;
    l[head] = sum;
  }
  std::fill(acc, acc + h * hd, 0.0f);
  for_each_run([&](int64_t at, int64_t first, int64_t count) {
    for (int64_t t0 = 0; t0 < count; t0 += kValueChunk) {
      const int64_t tn = std::min(kValueChunk, count - t0);
      for (int64_t head = 0; head < h; ++head) {
        AddWeightedRows(s + head * n + first + t0, tn,
                        v_pool + at + t0 * kv_row + (head / group) * hd, kv_row,
                        hd, acc + head * hd);
      }
    }
  });
}

}  // namespace

absl::Status CheckTableReach(absl::string_view op, const PagedRows& rows,
                             int64_t block_size, int64_t width,
                             int64_t row_floats,
                             absl::Span<const int32_t> table,
                             int64_t pool_floats,
                             absl::FunctionRef<int64_t(int64_t)> blocks_for) {
  TWICE_RETURN_IF_ERROR(CheckArg(
      rows.rows >= 0 && rows.start >= 0 &&
          (rows.positions.empty() ||
           static_cast<int64_t>(rows.positions.size()) == rows.rows),
      op, "need rows >= 0, start >= 0 and no or one position per row"));
  const int64_t block_floats = block_size * row_floats;
  TWICE_RETURN_IF_ERROR(CheckArg(pool_floats % block_floats == 0, op,
                                 "the pool is not a whole number of blocks"));
  if (rows.rows == 0) return absl::OkStatus();
  const int64_t blocks = pool_floats / block_floats;
  const int64_t table_rows = rows.positions.empty() ? 1 : rows.rows;
  if (static_cast<int64_t>(table.size()) != table_rows * width) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": the block table has ", table.size(),
                     " entries, need ", table_rows, " x ", width));
  }
  // A prefill pass's last row reaches furthest.
  for (int64_t trow = 0; trow < table_rows; ++trow) {
    const int64_t p = rows.positions.empty() ? rows.start + rows.rows - 1
                                             : rows.positions[trow];
    if (p < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": position ", p, " < 0"));
    }
    const int64_t needed = blocks_for(p);
    if (needed > width) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": position ", p, " needs ", needed,
                       " blocks, the block table has ", width));
    }
    for (int64_t b = 0; b < needed; ++b) {
      const int32_t block = table[trow * width + b];
      if (block < 0 || block >= blocks) {
        return absl::InvalidArgumentError(absl::StrCat(
            op, ": block table entry ", block, " is not in [0, ", blocks, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPagedRows(const PagedRows& rows, const PagedKvDims& dims,
                            absl::Span<const int32_t> table,
                            int64_t pool_floats) {
  constexpr char kOp[] = "PagedAttention";
  TWICE_RETURN_IF_ERROR(CheckArg(
      dims.heads >= 1 && dims.kv_heads >= 1 &&
          dims.heads % dims.kv_heads == 0 && dims.head_dim >= 1 &&
          dims.block_size >= 1 && dims.table_width >= 1,
      kOp, "need H_kv | H, head_dim, block_size and table width >= 1"));
  // Positions [0, p]: blocks [0, p / block_size].
  return CheckTableReach(kOp, rows, dims.block_size, dims.table_width,
                         dims.kv_heads * dims.head_dim, table, pool_floats,
                         [&](int64_t p) { return p / dims.block_size + 1; });
}

absl::Status PagedKvWrite(absl::Span<const float> k, int64_t k_stride,
                          absl::Span<const float> v, int64_t v_stride,
                          const PagedRows& rows, const PagedKvDims& dims,
                          absl::Span<const int32_t> table,
                          absl::Span<float> k_pool, absl::Span<float> v_pool) {
  constexpr char kOp[] = "PagedKvWrite";
  TWICE_RETURN_IF_ERROR(
      CheckPagedRows(rows, dims, table, static_cast<int64_t>(k_pool.size())));
  const int64_t kv_row = dims.kv_heads * dims.head_dim;
  TWICE_RETURN_IF_ERROR(CheckArg(k_pool.size() == v_pool.size(), kOp,
                                 "the key and value pools differ in size"));
  TWICE_RETURN_IF_ERROR(CheckArg(k_stride >= kv_row && v_stride >= kv_row, kOp,
                                 "a row stride is below H_kv * head_dim"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "k", k.size(), StridedExtent(rows.rows, kv_row, k_stride)));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "v", v.size(), StridedExtent(rows.rows, kv_row, v_stride)));
  for (int64_t r = 0; r < rows.rows; ++r) {
    const int64_t at =
        PoolRow(dims, table, TableRowOf(rows, r), PositionOf(rows, r)) * kv_row;
    std::copy_n(k.data() + r * k_stride, kv_row, k_pool.data() + at);
    std::copy_n(v.data() + r * v_stride, kv_row, v_pool.data() + at);
  }
  return absl::OkStatus();
}

absl::Status PagedCausalAttention(absl::Span<const float> q, int64_t q_stride,
                                  const PagedRows& rows,
                                  const PagedKvDims& dims,
                                  absl::Span<const int32_t> table,
                                  absl::Span<const float> k_pool,
                                  absl::Span<const float> v_pool, float scale,
                                  absl::Span<float> out) {
  constexpr char kOp[] = "PagedCausalAttention";
  TWICE_RETURN_IF_ERROR(
      CheckPagedRows(rows, dims, table, static_cast<int64_t>(k_pool.size())));
  const int64_t h = dims.heads, hd = dims.head_dim;
  TWICE_RETURN_IF_ERROR(CheckArg(k_pool.size() == v_pool.size(), kOp,
                                 "the key and value pools differ in size"));
  TWICE_RETURN_IF_ERROR(
      CheckArg(q_stride >= h * hd, kOp, "q_stride < heads * head_dim"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "q", q.size(), StridedExtent(rows.rows, h * hd, q_stride)));
  TWICE_RETURN_IF_ERROR(
      CheckArg(static_cast<int64_t>(out.size()) == rows.rows * h * hd, kOp,
               "out is not [rows, heads, head_dim]"));
  if (rows.rows == 0) return absl::OkStatus();
  if (rows.positions.empty() && rows.rows >= cpu::kPrefillTileRows) {
    cpu::PagedPrefillAttention(q.data(), q_stride, rows.rows, rows.start, dims,
                               table.data(), k_pool.data(), v_pool.data(),
                               scale, out.data());
    return absl::OkStatus();
  }
  // Work items are (row, part) pairs: a row's positions split into
  // `parts` ranges when there are fewer rows than threads (a small decode
  // batch), else one range per row. Each item owns its scores; the parts
  // merge by their maxima: out = Σ acc_i e^{m_i - M} / Σ l_i e^{m_i - M}.
  const int64_t parts = rows.rows < CpuThreads() ? CpuThreads() : 1;
  std::vector<float> m(rows.rows * parts * h), l(m.size());
  std::vector<float> acc(m.size() * hd);
  cpu::ParallelFor(rows.rows * parts, [&](int64_t item) {
    const int64_t r = item / parts, part = item % parts;
    const int64_t n = PositionOf(rows, r) + 1;
    const int64_t j0 = n * part / parts, j1 = n * (part + 1) / parts;
    float* m_i = m.data() + item * h;
    if (j0 == j1) {
      std::fill(m_i, m_i + h, -INFINITY);
      std::fill(l.data() + item * h, l.data() + (item + 1) * h, 0.0f);
      return;
    }
    thread_local std::vector<float> s;
    s.resize(static_cast<size_t>(h * (j1 - j0)));
    AttendPagedRange(q.data() + r * q_stride, dims,
                     table.data() + TableRowOf(rows, r) * dims.table_width, j0,
                     j1, k_pool.data(), v_pool.data(), scale, s.data(), m_i,
                     l.data() + item * h, acc.data() + item * h * hd);
  });
  for (int64_t r = 0; r < rows.rows; ++r) {
    for (int64_t head = 0; head < h; ++head) {
      float top = -INFINITY;
      for (int64_t part = 0; part < parts; ++part) {
        top = std::max(top, m[(r * parts + part) * h + head]);
      }
      float* o = out.data() + (r * h + head) * hd;
      std::fill(o, o + hd, 0.0f);
      float sum = 0.0f;
      for (int64_t part = 0; part < parts; ++part) {
        const int64_t at = (r * parts + part) * h + head;
        if (l[at] == 0.0f) continue;
        const float w = SoftmaxWeight(m[at] - top);
        sum += w * l[at];
        const float* a = acc.data() + at * hd;
        for (int64_t e = 0; e < hd; ++e) o[e] += w * a[e];
      }
      const float inv = 1.0f / sum;
      for (int64_t e = 0; e < hd; ++e) o[e] *= inv;
    }
  }
  return absl::OkStatus();
}

}  // namespace twice::kernels
