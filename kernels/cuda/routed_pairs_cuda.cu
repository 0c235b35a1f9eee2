// A mixture of experts routed on the device, per (row, choice) pair (CPU
// twins: kernels/top_k_routing.h RouteTopKPairs and CombineRoutedPairs;
// RoutedLinear's twin is a product per expert over its gathered pairs).
// Nothing comes back to the host, and every launch has the same shape
// for a given number of rows, so a decode step that holds them can be
// recorded as a graph.
//
//   RouteTopKPairsKernel   thread per row: the k largest logits (ties:
//                          the lower expert; NaN ranks last) by k passes
//                          over the experts, sorted by expert, gated by a
//                          softmax over the k in double (as RouteTopK); a
//                          padding row (its slot at or past the first pad
//                          slot) takes no expert (-1, gate 0).
//   ListPairsKernel        thread per pair: appends the pair to its
//                          expert's list (atomic slot; the order within
//                          a list does not matter, every output element
//                          is one pair's own dot product); a pair with
//                          no expert gets a row of zeros instead.
//   GroupedGemvKernel      warp per (expert, output row n): for each pair
//                          of the expert, the dot product of W_e[n, :]
//                          (bf16) with the pair's x row rounded to bf16
//                          (what a GEMM's converted input is), f32 sums;
//                          an expert with no pair returns at once, so each
//                          used expert's weights are read from memory
//                          once per call, its later pairs from cache.
//   CombineRoutedPairsKernel  thread per (row, column): base plus the
//                          row's k gated results in pair order.
#include <cuda_bf16.h>

#include <algorithm>
#include <cfloat>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/warp_softmax_row.cuh"

namespace twice::kernels::cuda::launch {
namespace {

constexpr int kPairThreads = 256;

unsigned PairBlocks(int64_t work) {
  return static_cast<unsigned>(std::min<int64_t>(
      (work + kPairThreads - 1) / kPairThreads, int64_t{1} << 20));
}

// NaN ranks below every number (RouteTopK's key).
__device__ __forceinline__ float RankKey(float v) {
  return isnan(v) ? -INFINITY : v;
}

__global__ void RouteTopKPairsKernel(const float* logits, int64_t rows,
                                     int experts, int k,
                                     const int32_t* row_slots,
                                     int32_t first_pad_slot,
                                     float* pair_experts, float* pair_gates) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows;
       r += int64_t{gridDim.x} * blockDim.x) {
    if (row_slots != nullptr && row_slots[r] >= first_pad_slot) {
      for (int j = 0; j < k; ++j) {
        pair_experts[r * k + j] = kNoExpertPair;
        pair_gates[r * k + j] = 0.0f;
      }
      continue;
    }
    const float* l = logits + r * experts;
    int chosen[kMaxDeviceTopK];
    for (int j = 0; j < k; ++j) {
      int best = -1;
      float best_key = 0.0f;
      for (int e = 0; e < experts; ++e) {
        bool taken = false;
        for (int i = 0; i < j; ++i) taken = taken || chosen[i] == e;
        if (taken) continue;
        const float key = RankKey(l[e]);
        // Strictly greater: ties keep the lower expert.
        if (best < 0 || key > best_key) {
          best = e;
          best_key = key;
        }
      }
      chosen[j] = best;
    }
    const float top = l[chosen[0]];
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += exp(double{l[chosen[j]]} - top);
    // Insertion sort by expert; each gate follows its expert.
    float gates[kMaxDeviceTopK];
    for (int j = 0; j < k; ++j) {
      gates[j] = static_cast<float>(exp(double{l[chosen[j]]} - top) / sum);
    }
    for (int j = 1; j < k; ++j) {
      const int e = chosen[j];
      const float g = gates[j];
      int i = j - 1;
      for (; i >= 0 && chosen[i] > e; --i) {
        chosen[i + 1] = chosen[i];
        gates[i + 1] = gates[i];
      }
      chosen[i + 1] = e;
      gates[i + 1] = g;
    }
    for (int j = 0; j < k; ++j) {
      pair_experts[r * k + j] = static_cast<float>(chosen[j]);
      pair_gates[r * k + j] = gates[j];
    }
  }
}

// counts [E] (zeroed before), lists [E, pairs]; y [pairs, n_rows] gets
// its rows of zeros for the pairs with no expert.
__global__ void ListPairsKernel(const float* pair_experts, int64_t pairs,
                                int experts, int32_t* counts, int32_t* lists,
                                int64_t n_rows, float* y) {
  for (int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; p < pairs;
       p += int64_t{gridDim.x} * blockDim.x) {
    const float ef = pair_experts[p];
    if (ef == kNoExpertPair) {  // a padding row's pair: a few per step at most
      for (int64_t n = 0; n < n_rows; ++n) y[p * n_rows + n] = 0.0f;
      continue;
    }
    // Only the routing kernel writes these; a value out of range (never
    // expected) is dropped rather than written out of bounds.
    if (!(ef >= 0.0f && ef < static_cast<float>(experts))) continue;
    const int e = static_cast<int>(ef);
    const int slot = atomicAdd(counts + e, 1);
    lists[int64_t{e} * pairs + slot] = static_cast<int32_t>(p);
  }
}

__device__ __forceinline__ float RoundedToBf16(float v) {
  return __bfloat162float(__float2bfloat16(v));
}

__global__ void GroupedGemvKernel(const float* x, int64_t x_group,
                                  const bf16_bits* const* weights, int experts,
                                  int64_t n_rows, int64_t cols,
                                  const int32_t* counts, const int32_t* lists,
                                  int64_t pairs, float* y) {
  const int64_t warps = (int64_t{gridDim.x} * blockDim.x) >> 5;
  const int lane = threadIdx.x & 31;
  const bool pairs_of_two = cols % 2 == 0;  // rows start 4-byte aligned
  for (int64_t w = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) >> 5;
       w < experts * n_rows; w += warps) {
    const int e = static_cast<int>(w / n_rows);
    const int64_t n = w % n_rows;
    const int count = counts[e];
    if (count == 0) continue;  // warp-uniform
    const auto* wrow =
        reinterpret_cast<const __nv_bfloat16*>(weights[e]) + n * cols;
    for (int i = 0; i < count; ++i) {
      const int64_t p = lists[int64_t{e} * pairs + i];
      const float* xr = x + (p / x_group) * cols;
      float dot = 0.0f;
      if (pairs_of_two) {
        const auto* w2 = reinterpret_cast<const __nv_bfloat162*>(wrow);
        for (int64_t c = lane; c < cols / 2; c += 32) {
          const float2 wf = __bfloat1622float2(w2[c]);
          dot += wf.x * RoundedToBf16(xr[2 * c]) +
                 wf.y * RoundedToBf16(xr[2 * c + 1]);
        }
      } else {
        for (int64_t c = lane; c < cols; c += 32) {
          dot += __bfloat162float(wrow[c]) * RoundedToBf16(xr[c]);
        }
      }
      dot = WarpSum(dot);
      if (lane == 0) y[p * n_rows + n] = dot;
    }
  }
}

__global__ void CombineRoutedPairsKernel(const float* base, const float* routed,
                                         int64_t cols, int64_t rows, int k,
                                         const float* gates, float scale,
                                         float* x) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    float sum = base[i];
    for (int j = 0; j < k; ++j) {
      sum += gates[r * k + j] * routed[(r * k + j) * cols + c];
    }
    x[i] += scale * sum;
  }
}

}  // namespace

cudaError_t RouteTopKPairs(const float* logits, int64_t rows, int experts,
                           int k, const int32_t* row_slots,
                           int32_t first_pad_slot, float* pair_experts,
                           float* pair_gates, cudaStream_t stream) {
  RouteTopKPairsKernel<<<PairBlocks(rows), kPairThreads, 0, stream>>>(
      logits, rows, experts, k, row_slots, first_pad_slot, pair_experts,
      pair_gates);
  return cudaGetLastError();
}

cudaError_t RoutedLinear(const float* x, int64_t x_group,
                         const bf16_bits* const* weights, int experts,
                         int64_t n_rows, int64_t cols,
                         const float* pair_experts, int64_t pairs,
                         int32_t* workspace, float* y, cudaStream_t stream) {
  int32_t* counts = workspace;
  int32_t* lists = workspace + experts;
  if (const cudaError_t e = cudaMemsetAsync(
          counts, 0, sizeof(int32_t) * static_cast<size_t>(experts), stream);
      e != cudaSuccess) {
    return e;
  }
  ListPairsKernel<<<PairBlocks(pairs), kPairThreads, 0, stream>>>(
      pair_experts, pairs, experts, counts, lists, n_rows, y);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  GroupedGemvKernel<<<PairBlocks(int64_t{experts} * n_rows * 32), kPairThreads,
                      0, stream>>>(x, x_group, weights, experts, n_rows, cols,
                                   counts, lists, pairs, y);
  return cudaGetLastError();
}

cudaError_t CombineRoutedPairs(const float* base, const float* routed,
                               int64_t cols, int64_t rows, int k,
                               const float* gates, float scale, float* x,
                               cudaStream_t stream) {
  CombineRoutedPairsKernel<<<PairBlocks(rows * cols), kPairThreads, 0,
                             stream>>>(base, routed, cols, rows, k, gates,
                                       scale, x);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
