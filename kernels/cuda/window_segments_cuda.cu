// Sliding-window attention for every sequence of a prefill pass in three
// launches, f32 (the per-segment form gathers each ring into a context
// first: a dozen launches per sequence per layer). Segment s is rows
// [first_row, first_row + rows) of the pass at positions start + i of its
// sequence, with its slot's ring of the last L keys and values (position p
// in ring row p mod L, kernels/slot_steps.h's layout).
//
//   rotate    thread per (row, head, pair f < hd/2): q and k of the pass's
//             rows turned in place by p · base^(-2f / hd) (angles in
//             double, as kernels/rope.h)
//   attend    warp per (row, head) (WarpSoftmaxRow, warp_softmax_row.cuh)
//             over positions max(0, p - L) .. p: those before the segment
//             from the ring, the segment's own from the pass's rows
//   keep      thread per (kept row, column): the segment's last min(rows,
//             L) keys and values into their ring rows, after every read
//             of the ring (the next launch on the stream)
#include <cstdint>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/warp_softmax_row.cuh"

namespace twice::kernels::cuda::launch {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 65535;

unsigned BlocksFor(int64_t threads) {
  const int64_t blocks = (threads + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1            ? 1
                               : blocks > kMaxBlocks ? kMaxBlocks
                                                     : blocks);
}

__global__ void RotateSegmentsKernel(WindowSegmentsArgs a,
                                     const PassSegment* segments) {
  const PassSegment s = segments[blockIdx.y];
  const int half = a.head_dim / 2;
  const int64_t width = int64_t{a.heads} * a.head_dim;
  const int64_t total = s.rows * a.heads * half;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = t / (int64_t{a.heads} * half);
    const int h = static_cast<int>(t / half % a.heads);
    const int f = static_cast<int>(t % half);
    const double inv_freq = pow(static_cast<double>(a.rotary_base),
                                -2.0 * f / static_cast<double>(a.head_dim));
    double sin_d;
    double cos_d;
    sincos(static_cast<double>(s.start + i) * inv_freq, &sin_d, &cos_d);
    const float c = static_cast<float>(cos_d);
    const float sn = static_cast<float>(sin_d);
    // q at column 0 of the row, k at column width; dims f and f + half.
    float* row =
        a.qkv + (s.first_row + i) * a.qkv_stride + int64_t{h} * a.head_dim;
    for (int part = 0; part < 2; ++part) {
      float* x = row + part * width;
      const float x1 = x[f];
      const float x2 = x[f + half];
      x[f] = x1 * c - x2 * sn;
      x[f + half] = x2 * c + x1 * sn;
    }
  }
}

// Warps loop over the segment's (row, head) pairs by the grid's warp count;
// the bounds are the same for all lanes of a warp, so the shuffles stay
// convergent.
__global__ void AttendSegmentsKernel(WindowSegmentsArgs a,
                                     const PassSegment* segments) {
  const PassSegment s = segments[blockIdx.y];
  const int64_t warps = (int64_t{gridDim.x} * blockDim.x) >> 5;
  const int hd = a.head_dim;
  const int64_t width = int64_t{a.heads} * hd;
  const float* ring_k = a.ring_k + s.slot * a.window * width;
  const float* ring_v = a.ring_v + s.slot * a.window * width;
  for (int64_t w = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) >> 5;
       w < s.rows * a.heads; w += warps) {
    const int64_t i = w / a.heads;
    const int64_t off = (w % a.heads) * hd;
    const int64_t p = s.start + i;
    WarpSoftmaxRow row(a.qkv + (s.first_row + i) * a.qkv_stride + off, hd,
                       a.scale);
    const int64_t first = p - a.window > 0 ? p - a.window : 0;
    for (int64_t j = first; j < s.start; ++j) {  // before the segment
      const int64_t ring_row = (j % a.window) * width + off;
      row.Visit(ring_k + ring_row, ring_v + ring_row);
    }
    for (int64_t j = first > s.start ? first : s.start; j <= p; ++j) {
      const float* k_row =
          a.qkv + (s.first_row + j - s.start) * a.qkv_stride + width + off;
      row.Visit(k_row, k_row + width);
    }
    row.Store(a.y + (s.first_row + i) * width + off);
  }
}

__global__ void KeepSegmentsKernel(WindowSegmentsArgs a,
                                   const PassSegment* segments) {
  const PassSegment s = segments[blockIdx.y];
  const int64_t width = int64_t{a.heads} * a.head_dim;
  const int64_t keep = s.rows < a.window ? s.rows : a.window;
  float* ring_k = a.ring_k + s.slot * a.window * width;
  float* ring_v = a.ring_v + s.slot * a.window * width;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
       t < keep * width; t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = s.rows - keep + t / width;
    const int64_t c = t % width;
    const float* k_row =
        a.qkv + (s.first_row + i) * a.qkv_stride + width;  // k | v
    const int64_t row = ((s.start + i) % a.window) * width;
    ring_k[row + c] = k_row[c];
    ring_v[row + c] = k_row[width + c];
  }
}

}  // namespace

cudaError_t WindowAttentionSegments(const WindowSegmentsArgs& args,
                                    const PassSegment* segments, int count,
                                    int64_t max_rows, cudaStream_t stream) {
  const int64_t width = int64_t{args.heads} * args.head_dim;
  const unsigned n = static_cast<unsigned>(count);
  RotateSegmentsKernel<<<dim3(BlocksFor(max_rows * width / 2), n), kThreads, 0,
                         stream>>>(args, segments);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  AttendSegmentsKernel<<<dim3(BlocksFor(max_rows * args.heads * 32), n),
                         kThreads, 0, stream>>>(args, segments);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const int64_t keep = max_rows < args.window ? max_rows : args.window;
  KeepSegmentsKernel<<<dim3(BlocksFor(keep * width), n), kThreads, 0, stream>>>(
      args, segments);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
