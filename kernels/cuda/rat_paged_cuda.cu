// RAT over paged closed chunks on CUDA (CPU twins: kernels/rat_paged.h),
// f32.
//
// Layouts: proj rows [z̃ | v | g̃ | q̃ | k̃] (3D + 2·G·hd wide, row stride
// proj_stride); open [slots, 2, D] (pre-rotation k̄ | v̄ of each sequence's
// last token); closed [blocks, block_size, 2, D] (rotated key | value of
// one closed chunk per row); q_out, k_out, v_out, z_out, out [rows, D].
// Row r sits at position p (start + r with slot slots[0] and table row 0
// for a prefill, else positions[r] with slot slots[r] and table row r),
// t = p mod L, c = p / L; chunk c of table row u is closed row
// table[u · width + c / block_size] · block_size + c mod block_size.
//
//   RatChunkScan       thread per (row group, head h, rotary pair f < hd/2)
//                      on channels e = h·hd + f and e + hd/2, so it can
//                      rotate both after the EMA:
//                        g = σ(g̃_e + bias_e),
//                        k̄ = (1 − g) k̃[e mod G·hd]          (t = 0)
//                          = g k̄ + (1 − g) k̃[e mod G·hd]    (else), v̄ alike,
//                        q = q̃[e mod G·hd], z = σ(z̃_e);
//                      q and k̄ rotated (rotate-half, angle c · base^(-2f/hd)
//                      in double, as RopeKernel); t = L − 1 writes the
//                      rotated k̄ and v̄ as chunk c's closed row. The EMA
//                      restarts at every chunk, so a prefill's row group is
//                      its rows inside one chunk, looped in order; the
//                      first group continues the open state and the last
//                      writes it back, both in one thread (the first
//                      group's), so the read comes before the write. A
//                      step's row group is its one row.
//   RatChunkScanSegments  the prefill form for every segment of a pass in
//                      one launch: grid row y is segment y, with its own
//                      rows, positions, slot and table row.
//   RatPagedAttention  warp per (row, head), warps looping over the pairs by
//                      the grid's warp count; WarpSoftmaxRow over the row's
//                      closed chunks c' < c (walking its table's blocks) and
//                      then its own key and value; the output times z.
//                      A prefill pass of kTileRows rows or more: block per
//                      (kTileRows consecutive rows, head), the closed
//                      chunks the block's rows see staged kTileKeys at a
//                      time in shared memory (TileSoftmaxRow,
//                      tile_softmax_row.cuh), so one read of a chunk's key
//                      serves every row of the block.
#include <algorithm>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/paged_rows.cuh"
#include "kernels/cuda/tile_softmax_row.cuh"
#include "kernels/cuda/warp_softmax_row.cuh"

namespace twice::kernels::cuda::launch {
namespace {

// As the CPU twin's: 1 / (1 + e^{-x}).
__device__ __forceinline__ float RatSigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

// One thread's channel pair e1 = h·hd + f, e2 = e1 + hd/2 and its running
// k̄ | v̄ (pre-rotation).
struct RatScanPair {
  int64_t e1 = 0;
  int64_t e2 = 0;
  double inv_freq = 0.0;  // base^(-2f/hd)
  float k1 = 0.0f;
  float k2 = 0.0f;
  float v1 = 0.0f;
  float v2 = 0.0f;
};

struct RatScanOutputs {
  float* closed;
  float* q;
  float* k;
  float* v;
  float* z;
};

// Rows [begin, end) of the pass in order, for one channel pair.
__device__ void RatScanRows(const RatPagedArgs& a, int64_t begin, int64_t end,
                            const float* proj, int64_t proj_stride,
                            const float* bias, RatScanPair& s,
                            const RatScanOutputs& out) {
  const int64_t d = a.dim;
  const int64_t qk = int64_t{a.groups} * (d / a.heads);
  const int64_t l_len = a.chunk_size;
  const int64_t e1 = s.e1;
  const int64_t e2 = s.e2;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t p = PassRowPosition(a, r);
    const int64_t t = p % l_len;
    const int64_t c = p / l_len;
    const float* row = proj + r * proj_stride;
    const float* zt = row;
    const float* v = row + d;
    const float* gt = row + 2 * d;
    const float* qt = row + 3 * d;
    const float* kt = qt + qk;
    const float g1 = RatSigmoid(gt[e1] + bias[e1]);
    const float g2 = RatSigmoid(gt[e2] + bias[e2]);
    const float kn1 = kt[e1 % qk];
    const float kn2 = kt[e2 % qk];
    if (t == 0) {
      s.k1 = (1.0f - g1) * kn1;
      s.k2 = (1.0f - g2) * kn2;
      s.v1 = (1.0f - g1) * v[e1];
      s.v2 = (1.0f - g2) * v[e2];
    } else {
      s.k1 = g1 * s.k1 + (1.0f - g1) * kn1;
      s.k2 = g2 * s.k2 + (1.0f - g2) * kn2;
      s.v1 = g1 * s.v1 + (1.0f - g1) * v[e1];
      s.v2 = g2 * s.v2 + (1.0f - g2) * v[e2];
    }
    double sd;
    double cd;
    sincos(static_cast<double>(c) * s.inv_freq, &sd, &cd);
    const float cs = static_cast<float>(cd);
    const float sn = static_cast<float>(sd);
    const float q1 = qt[e1 % qk];
    const float q2 = qt[e2 % qk];
    const float rk1 = s.k1 * cs - s.k2 * sn;
    const float rk2 = s.k2 * cs + s.k1 * sn;
    const int64_t o1 = r * d + e1;
    const int64_t o2 = r * d + e2;
    out.q[o1] = q1 * cs - q2 * sn;
    out.q[o2] = q2 * cs + q1 * sn;
    out.k[o1] = rk1;
    out.k[o2] = rk2;
    out.v[o1] = s.v1;
    out.v[o2] = s.v2;
    out.z[o1] = RatSigmoid(zt[e1]);
    out.z[o2] = RatSigmoid(zt[e2]);
    if (t == l_len - 1) {
      const int64_t pool_row =
          int64_t{PassTableRow(a, r)[c / a.block_size]} * a.block_size +
          c % a.block_size;
      float* chunk = out.closed + pool_row * 2 * d;
      chunk[e1] = rk1;
      chunk[e2] = rk2;
      chunk[d + e1] = s.v1;
      chunk[d + e2] = s.v2;
    }
  }
}

// Row group g's rows: a step's row g, or a prefill's rows inside chunk
// start / L + g.
__device__ __forceinline__ void RatGroupRows(const RatPagedArgs& a, int64_t g,
                                             int64_t& begin, int64_t& end) {
  if (a.positions != nullptr) {
    begin = g;
    end = g + 1;
    return;
  }
  const int64_t chunk_begin =
      (a.start / a.chunk_size + g) * a.chunk_size - a.start;
  const int64_t chunk_end = chunk_begin + a.chunk_size;
  begin = chunk_begin > 0 ? chunk_begin : 0;
  end = chunk_end < a.rows ? chunk_end : a.rows;
}

// Thread group k of channel pair (h, f): row group k; for a prefill of
// several groups, thread group 0 also runs the last one, so the open
// state (`state`, the sequence's [2, D] row of open) is read (by the
// first group) and written (by the last) in one thread's program order.
__device__ void RatScanThreadGroup(const RatPagedArgs& a, int64_t row_groups,
                                   int64_t k, int h, int f, const float* proj,
                                   int64_t proj_stride, const float* bias,
                                   float* state, const RatScanOutputs& out) {
  const int64_t d = a.dim;
  const int hd = static_cast<int>(d / a.heads);
  const bool step = a.positions != nullptr;
  RatScanPair s;
  s.e1 = int64_t{h} * hd + f;
  s.e2 = s.e1 + hd / 2;
  s.inv_freq =
      pow(static_cast<double>(a.rope_base), -2.0 * f / static_cast<double>(hd));
  int64_t begin;
  int64_t end;
  RatGroupRows(a, k, begin, end);
  if (PassRowPosition(a, begin) % a.chunk_size != 0) {
    s.k1 = state[s.e1];
    s.k2 = state[s.e2];
    s.v1 = state[d + s.e1];
    s.v2 = state[d + s.e2];
  }
  RatScanRows(a, begin, end, proj, proj_stride, bias, s, out);
  if (!step && k == 0 && row_groups > 1) {
    RatGroupRows(a, row_groups - 1, begin, end);
    RatScanRows(a, begin, end, proj, proj_stride, bias, s, out);
  }
  if (end == (step ? k + 1 : a.rows)) {
    state[s.e1] = s.k1;
    state[s.e2] = s.k2;
    state[d + s.e1] = s.v1;
    state[d + s.e2] = s.v2;
  }
}

// A prefill's row groups (its rows inside each chunk it touches) and the
// thread groups that run them (the first also runs the last).
__device__ __host__ __forceinline__ int64_t
RatPrefillRowGroups(int64_t start, int64_t rows, int64_t chunk_size) {
  return (start + rows - 1) / chunk_size - start / chunk_size + 1;
}
__device__ __host__ __forceinline__ int64_t
RatThreadGroups(int64_t row_groups) {
  return row_groups > 1 ? row_groups - 1 : 1;
}

__global__ void RatChunkScanKernel(RatPagedArgs a, int64_t row_groups,
                                   int64_t thread_groups, const float* proj,
                                   int64_t proj_stride, const float* bias,
                                   const int32_t* slots, float* open,
                                   RatScanOutputs out) {
  const int half = static_cast<int>(a.dim / a.heads) / 2;
  const int64_t per_group = int64_t{a.heads} * half;
  const bool step = a.positions != nullptr;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
       i < thread_groups * per_group; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t k = i / per_group;
    RatScanThreadGroup(a, row_groups, k, static_cast<int>((i / half) % a.heads),
                       static_cast<int>(i % half), proj, proj_stride, bias,
                       open + int64_t{slots[step ? k : 0]} * 2 * a.dim, out);
  }
}

// Segment blockIdx.y of a pass: RatChunkScanKernel's prefill form on its
// rows, positions, slot and table row (row first_row of `base.table`, the
// pass's row-form table).
__global__ void RatChunkScanSegmentsKernel(
    RatPagedArgs base, const PassSegment* segments, const float* proj,
    int64_t proj_stride, const float* bias, float* open, RatScanOutputs out) {
  const PassSegment seg = segments[blockIdx.y];
  if (seg.rows <= 0) return;
  RatPagedArgs a = base;
  a.rows = seg.rows;
  a.start = seg.start;
  a.positions = nullptr;
  a.table = base.table + seg.first_row * base.table_width;
  const int64_t d = a.dim;
  const RatScanOutputs own{out.closed, out.q + seg.first_row * d,
                           out.k + seg.first_row * d, out.v + seg.first_row * d,
                           out.z + seg.first_row * d};
  const int64_t row_groups = RatPrefillRowGroups(a.start, a.rows, a.chunk_size);
  const int64_t thread_groups = RatThreadGroups(row_groups);
  const int half = static_cast<int>(d / a.heads) / 2;
  const int64_t per_group = int64_t{a.heads} * half;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
       i < thread_groups * per_group; i += int64_t{gridDim.x} * blockDim.x) {
    RatScanThreadGroup(
        a, row_groups, i / per_group, static_cast<int>((i / half) % a.heads),
        static_cast<int>(i % half), proj + seg.first_row * proj_stride,
        proj_stride, bias, open + seg.slot * 2 * d, own);
  }
}

// The loop bounds are the same for all lanes of a warp, so the shuffles
// stay convergent.
__global__ void RatPagedAttentionKernel(RatPagedArgs a, const float* q,
                                        const float* own_k, const float* own_v,
                                        const float* z, const float* closed,
                                        float scale, float* out) {
  const int64_t warps = (int64_t{gridDim.x} * blockDim.x) >> 5;
  const int lane = threadIdx.x & 31;
  const int64_t d = a.dim;
  const int hd = static_cast<int>(d / a.heads);
  for (int64_t w = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) >> 5;
       w < a.rows * a.heads; w += warps) {
    const int64_t r = w / a.heads;
    const int64_t head = (w % a.heads) * hd;  // the head's first channel
    const int64_t off = r * d + head;
    const int64_t visible = PassRowPosition(a, r) / a.chunk_size;
    const int32_t* blocks = PassTableRow(a, r);
    WarpSoftmaxRow row(q + off, hd, scale);
    for (int64_t b = 0, first = 0; first < visible;
         ++b, first += a.block_size) {
      const int64_t base = int64_t{blocks[b]} * a.block_size;
      const int64_t count =
          visible - first < a.block_size ? visible - first : a.block_size;
      for (int64_t t = 0; t < count; ++t) {
        const float* chunk = closed + (base + t) * 2 * d + head;
        row.Visit(chunk, chunk + d);
      }
    }
    row.Visit(own_k + off, own_v + off);
    row.Store(out + off);
    // Each lane scales the dims it stored.
    for (int e = lane; e < hd; e += 32) out[off + e] *= z[off + e];
  }
}

constexpr int kTileRows = 16;  // query rows per block, one warp each

// grid (ceil(rows / kTileRows), H), kTileRows warps. Requires a prefill
// pass (positions null) and hd <= kTileMaxDim.
__global__ void __launch_bounds__(kTileRows * 32)
    RatPagedPrefillTileKernel(RatPagedArgs a, const float* q,
                              const float* own_k, const float* own_v,
                              const float* z, const float* closed, float scale,
                              float* out) {
  __shared__ float keys[kTileKeys * kTileKeyStride];
  __shared__ float values[kTileKeys * kTileMaxDim];
  __shared__ float queries[kTileRows * kTileMaxDim];
  const int64_t d = a.dim;
  const int hd = static_cast<int>(d / a.heads);
  const int h = blockIdx.y;
  const int64_t head = int64_t{h} * hd;  // the head's first channel
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const TileBlockRows b = ThisBlockRows(a.rows, kTileRows);
  // Closed chunks this warp's row sees, and the block's last row.
  const int64_t visible = (a.start + b.row) / a.chunk_size;
  const int64_t block_visible = (a.start + b.last) / a.chunk_size;
  StageQueryRows(q, d, h, hd, b, kTileRows, queries);
  const auto closed_row = [&](int64_t c) {
    return (int64_t{a.table[c / a.block_size]} * a.block_size +
            c % a.block_size) *
           2 * d;
  };
  TileSoftmaxRow row;
  for (int64_t base = 0; base < block_visible; base += kTileKeys) {
    __syncthreads();  // the previous tile is read (and the queries written)
    StageKeyTile(closed + head, closed + d + head, hd, base, block_visible - 1,
                 closed_row, keys, values);
    __syncthreads();
    // Warp-uniform: a finished warp, or a tile past the row's chunks.
    if (!b.active || base >= visible) continue;
    row.Visit(queries + warp * kTileMaxDim, keys, values, hd, scale,
              base + lane < visible);
  }
  // The queries other warps staged are read below even when no tile ran
  // (a block whose rows see no closed chunk yet).
  __syncthreads();
  if (!b.active) return;
  const int64_t off = b.row * d + head;
  row.VisitOne(queries + warp * kTileMaxDim, own_k + off, own_v + off, hd,
               scale);
  row.Store(out + off, hd);
  // Each lane scales the dims it stored.
  for (int e = lane; e < hd; e += 32) out[off + e] *= z[off + e];
}

}  // namespace

cudaError_t RatChunkScan(const RatPagedArgs& args, const float* proj,
                         int64_t proj_stride, const float* gate_bias,
                         const int32_t* slots, float* open, float* closed,
                         float* q_out, float* k_out, float* v_out, float* z_out,
                         cudaStream_t stream) {
  int64_t row_groups = args.rows;
  int64_t thread_groups = args.rows;
  if (args.positions == nullptr) {
    row_groups = RatPrefillRowGroups(args.start, args.rows, args.chunk_size);
    thread_groups = RatThreadGroups(row_groups);
  }
  const int64_t work = thread_groups * (args.dim / 2);
  RatChunkScanKernel<<<PagedGridBlocks(work), kPagedThreads, 0, stream>>>(
      args, row_groups, thread_groups, proj, proj_stride, gate_bias, slots,
      open, RatScanOutputs{closed, q_out, k_out, v_out, z_out});
  return cudaGetLastError();
}

cudaError_t RatChunkScanSegments(const RatPagedArgs& args,
                                 const PassSegment* segments, int count,
                                 int64_t max_thread_groups, const float* proj,
                                 int64_t proj_stride, const float* gate_bias,
                                 float* open, float* closed, float* q_out,
                                 float* k_out, float* v_out, float* z_out,
                                 cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const dim3 grid(PagedGridBlocks(max_thread_groups * (args.dim / 2)),
                  static_cast<unsigned>(count));
  RatChunkScanSegmentsKernel<<<grid, kPagedThreads, 0, stream>>>(
      args, segments, proj, proj_stride, gate_bias, open,
      RatScanOutputs{closed, q_out, k_out, v_out, z_out});
  return cudaGetLastError();
}

cudaError_t RatPagedAttention(const RatPagedArgs& args, const float* q,
                              const float* own_k, const float* own_v,
                              const float* z, const float* closed, float scale,
                              float* out, cudaStream_t stream) {
  if (args.positions == nullptr && args.rows >= kTileRows &&
      args.dim / args.heads <= kTileMaxDim && args.heads <= 65535) {
    const dim3 grid(
        static_cast<unsigned>((args.rows + kTileRows - 1) / kTileRows),
        static_cast<unsigned>(args.heads));
    RatPagedPrefillTileKernel<<<grid, kTileRows * 32, 0, stream>>>(
        args, q, own_k, own_v, z, closed, scale, out);
    return cudaGetLastError();
  }
  RatPagedAttentionKernel<<<PagedGridBlocks(args.rows * args.heads * 32),
                            kPagedThreads, 0, stream>>>(args, q, own_k, own_v,
                                                        z, closed, scale, out);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
