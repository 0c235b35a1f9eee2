// SampleRows on CUDA: one thread block per row, the rules of
// kernels/sampling.h computed without sorting, so that only the B token
// ids leave the device.
//
//   greedy    block argmax, ties to the lowest id.
//   weights   w_i = exp((l_i - max) / T) in double, as the CPU twin; they
//             are recomputed in each pass rather than stored (no workspace;
//             a pass over a 50k vocabulary is ~100 exps per thread).
//   top-k     radix select over the bits of w (a positive double's bits
//             order as its value) finds the k-th largest weight t; the
//             ties at t are kept in ascending id order, as the CPU's
//             (larger w, then lower id) order does.
//   top-p     the same radix walk, but on mass: per 8-bit digit a histogram
//             of counts and summed weights, walked from the largest digit
//             until the mass above plus the digit's reaches top_p of the
//             kept mass; the ties at the final weight are taken in id
//             order, as many as the remaining mass needs. The masses are
//             summed in a fixed order (lanes of one digit in lane order,
//             then per warp, then the warps in order), never by floating
//             atomics, so a row picks the same token on every run.
//   draw      u = SamplingUniform(seed, draw); a block scan in id order of
//             the kept weights finds the first id whose running sum exceeds
//             u times the kept mass.
//
// What is kept is always "w > cut.w, or w == cut.w and id <= cut.id", so
// each stage only moves the cut. The sums run in another order than the
// CPU's, which can move a pick only where u or the top-p mass lies within
// rounding of a boundary.
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/launch.h"
#include "kernels/sampling_uniform.h"

namespace twice::kernels::cuda::launch {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

struct Cut {
  double w;
  int64_t id;
};

__device__ __forceinline__ double Weight(float logit, double max,
                                         double inv_t) {
  return isnan(logit) ? 0.0 : exp((static_cast<double>(logit) - max) * inv_t);
}

__device__ __forceinline__ bool Kept(double w, int64_t id, const Cut& cut) {
  return w > 0.0 && (w > cut.w || (w == cut.w && id <= cut.id));
}

__device__ __forceinline__ uint64_t Bits(double w) {
  return static_cast<uint64_t>(__double_as_longlong(w));
}

// Block-wide sum; every thread gets the total. `scratch` holds kWarps
// values and may be reused after the call returns.
template <typename T>
__device__ T BlockSum(T v, T* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  T total = 0;
  for (int w = 0; w < kWarps; ++w) total += scratch[w];
  return total;
}

// Inclusive block scan in thread order; `total` gets the block's sum.
template <typename T>
__device__ T BlockInclusiveScan(T v, T* scratch, T& total) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T up = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += up;
  }
  __syncthreads();
  if (lane == 31) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  T before = 0;
  total = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < static_cast<int>(threadIdx.x >> 5)) before += scratch[w];
    total += scratch[w];
  }
  return before + v;
}

struct Shared {
  unsigned int count[256];
  double mass[256];
  double warp_mass[kWarps][256];  // top-p: each warp's digit masses
  double dscratch[kWarps];
  int64_t iscratch[kWarps];
  float best_v[kWarps];
  int64_t best_i[kWarps];
  // Results thread 0 or one finder thread publishes to the block.
  int64_t found;
  int chosen;
  int64_t remaining;
  double mass_above;
};

// The id of the n-th (1-based) element in id order that `pred` accepts, or
// -1 when there are fewer.
template <typename Pred>
__device__ int64_t NthInIdOrder(int64_t vocab, int64_t n, Pred pred,
                                Shared& s) {
  if (threadIdx.x == 0) s.found = -1;
  int64_t base = 0;
  for (int64_t tile = 0; tile < vocab; tile += kThreads) {
    const int64_t i = tile + threadIdx.x;
    const int64_t flag = i < vocab && pred(i) ? 1 : 0;
    int64_t total = 0;
    const int64_t incl = BlockInclusiveScan<int64_t>(flag, s.iscratch, total);
    if (flag && base + incl == n) s.found = i;
    base += total;
    __syncthreads();
    if (base >= n) break;  // uniform: every thread has the same base
  }
  __syncthreads();
  return s.found;
}

// Adds w to this warp's mass[digit] for the lanes where `take` holds;
// lanes of one digit are summed in lane order and their lowest lane adds
// the sum, so the result never depends on scheduling. Every lane of the
// warp calls it.
__device__ void AddWarpMass(bool take, int digit, double w, double* mass) {
  const unsigned active = __ballot_sync(0xffffffffu, take);
  if (!take) return;
  const unsigned same = __match_any_sync(active, digit);
  double sum = 0.0;
  for (unsigned rest = same; rest != 0; rest &= rest - 1) {
    sum += __shfl_sync(same, w, __ffs(rest) - 1);
  }
  if (static_cast<int>(threadIdx.x & 31) == __ffs(same) - 1) {
    mass[digit] += sum;
  }
}

// 512 threads need at most 128 registers each to launch.
__global__ void __launch_bounds__(kThreads)
    SampleRowsKernel(const float* logits, int64_t row_stride, int64_t vocab,
                     const SampleRule* rules, int32_t* out) {
  __shared__ Shared s;
  const float* row = logits + int64_t{blockIdx.x} * row_stride;
  const SampleRule rule = rules[blockIdx.x];

  // Argmax over sanitized logits (NaN as -inf), lowest id on ties.
  float bv = -INFINITY;
  int64_t bi = vocab;
  for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
    const float raw = row[j];
    const float val = isnan(raw) ? -INFINITY : raw;
    if (val > bv || (val == bv && j < bi)) {
      bv = val;
      bi = j;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (ov > bv || (ov == bv && oi < bi)) {
      bv = ov;
      bi = oi;
    }
  }
  if ((threadIdx.x & 31) == 0) {
    s.best_v[threadIdx.x >> 5] = bv;
    s.best_i[threadIdx.x >> 5] = bi;
  }
  __syncthreads();
  for (int w = 0; w < kWarps; ++w) {
    if (s.best_v[w] > bv || (s.best_v[w] == bv && s.best_i[w] < bi)) {
      bv = s.best_v[w];
      bi = s.best_i[w];
    }
  }
  const int32_t argmax = static_cast<int32_t>(bi < vocab ? bi : 0);
  if (rule.temperature == 0.0f || !isfinite(bv)) {
    if (threadIdx.x == 0) out[blockIdx.x] = argmax;
    return;
  }

  const double max = bv;
  const double inv_t = 1.0 / static_cast<double>(rule.temperature);
  Cut cut{0.0, -1};

  // ---- top-k ----------------------------------------------------------------
  if (rule.top_k > 0) {
    int64_t positive = 0;
    for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
      positive += Weight(row[j], max, inv_t) > 0.0 ? 1 : 0;
    }
    positive = BlockSum(positive, s.iscratch);
    if (rule.top_k < positive) {
      uint64_t prefix = 0, mask = 0;
      if (threadIdx.x == 0) s.remaining = rule.top_k;
      for (int shift = 56; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += kThreads) s.count[b] = 0;
        __syncthreads();
        for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
          const double w = Weight(row[j], max, inv_t);
          if (w > 0.0 && (Bits(w) & mask) == prefix) {
            atomicAdd(&s.count[(Bits(w) >> shift) & 255], 1u);
          }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
          int b = 255;
          for (; b > 0; --b) {
            if (s.count[b] >= s.remaining) break;
            s.remaining -= s.count[b];
          }
          s.chosen = b;
        }
        __syncthreads();
        prefix |= static_cast<uint64_t>(s.chosen) << shift;
        mask |= uint64_t{255} << shift;
      }
      const double t = __longlong_as_double(static_cast<long long>(prefix));
      const int64_t nth = NthInIdOrder(
          vocab, s.remaining,
          [&](int64_t i) { return Weight(row[i], max, inv_t) == t; }, s);
      cut = Cut{t, nth};
    }
  }

  // ---- top-p ----------------------------------------------------------------
  if (rule.top_p < 1.0f) {
    double kept = 0.0;
    for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
      const double w = Weight(row[j], max, inv_t);
      if (Kept(w, j, cut)) kept += w;
    }
    kept = BlockSum(kept, s.dscratch);
    const double target = static_cast<double>(rule.top_p) * kept;
    uint64_t prefix = 0, mask = 0;
    if (threadIdx.x == 0) s.mass_above = 0.0;
    double* const warp_mass = s.warp_mass[threadIdx.x >> 5];
    for (int shift = 56; shift >= 0; shift -= 8) {
      for (int b = threadIdx.x; b < 256; b += kThreads) s.count[b] = 0;
      for (int b = threadIdx.x; b < kWarps * 256; b += kThreads) {
        s.warp_mass[b / 256][b % 256] = 0.0;
      }
      __syncthreads();
      // Whole tiles, so that every lane of a warp reaches AddWarpMass.
      for (int64_t tile = 0; tile < vocab; tile += kThreads) {
        const int64_t j = tile + threadIdx.x;
        const double w = j < vocab ? Weight(row[j], max, inv_t) : 0.0;
        const bool take =
            j < vocab && Kept(w, j, cut) && (Bits(w) & mask) == prefix;
        const int digit = static_cast<int>((Bits(w) >> shift) & 255);
        if (take) atomicAdd(&s.count[digit], 1u);
        AddWarpMass(take, digit, w, warp_mass);
      }
      __syncthreads();
      for (int b = threadIdx.x; b < 256; b += kThreads) {
        double sum = 0.0;
        for (int w = 0; w < kWarps; ++w) sum += s.warp_mass[w][b];
        s.mass[b] = sum;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        int lowest = 0;
        while (lowest < 255 && s.count[lowest] == 0) ++lowest;
        int b = 255;
        for (; b > lowest; --b) {
          if (s.count[b] == 0) continue;
          if (s.mass_above + s.mass[b] >= target) break;
          s.mass_above += s.mass[b];
        }
        s.chosen = b;
        s.remaining = s.count[b];  // kept weights with this prefix
      }
      __syncthreads();
      prefix |= static_cast<uint64_t>(s.chosen) << shift;
      mask |= uint64_t{255} << shift;
    }
    const double t = __longlong_as_double(static_cast<long long>(prefix));
    // Every tie weighs t: take as many as the remaining mass needs.
    const double need = ceil((target - s.mass_above) / t);
    const int64_t ties = s.remaining;
    const int64_t take = need < 1.0 ? 1
                                    : (need >= static_cast<double>(ties)
                                           ? ties
                                           : static_cast<int64_t>(need));
    const Cut before = cut;
    const int64_t nth = NthInIdOrder(
        vocab, take,
        [&](int64_t i) {
          const double w = Weight(row[i], max, inv_t);
          return w == t && Kept(w, i, before);
        },
        s);
    cut = Cut{t, nth};
  }

  // ---- the draw -------------------------------------------------------------
  double kept = 0.0;
  int64_t last = -1;
  for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
    const double w = Weight(row[j], max, inv_t);
    if (Kept(w, j, cut)) {
      kept += w;
      last = j;
    }
  }
  kept = BlockSum(kept, s.dscratch);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const int64_t other = __shfl_xor_sync(0xffffffffu, last, o);
    last = other > last ? other : last;
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) s.best_i[threadIdx.x >> 5] = last;
  __syncthreads();
  for (int w = 0; w < kWarps; ++w)
    last = s.best_i[w] > last ? s.best_i[w] : last;

  const double target = SamplingUniform(rule.seed, rule.draw) * kept;
  if (threadIdx.x == 0) s.found = -1;
  __syncthreads();
  double base = 0.0;
  for (int64_t tile = 0; tile < vocab; tile += kThreads) {
    const int64_t i = tile + threadIdx.x;
    double w = 0.0;
    if (i < vocab) {
      w = Weight(row[i], max, inv_t);
      if (!Kept(w, i, cut)) w = 0.0;
    }
    double total = 0.0;
    const double incl = BlockInclusiveScan<double>(w, s.dscratch, total);
    // The lowest id whose running sum exceeds the target (the running sum
    // only grows, so that is the first crossing).
    if (w > 0.0 && target < base + incl) {
      atomicMin(reinterpret_cast<unsigned long long*>(&s.found),
                static_cast<unsigned long long>(i));
    }
    __syncthreads();
    if (s.found >= 0) break;
    base += total;
  }
  if (threadIdx.x == 0) {
    out[blockIdx.x] = static_cast<int32_t>(s.found >= 0 ? s.found : last);
  }
}

}  // namespace

cudaError_t SampleRows(const float* logits, int64_t rows, int64_t row_stride,
                       int64_t vocab, const SampleRule* rules, int32_t* out,
                       cudaStream_t stream) {
  SampleRowsKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      logits, row_stride, vocab, rules, out);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
