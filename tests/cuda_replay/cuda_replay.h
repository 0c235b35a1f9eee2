// The CUDA kernels' own source, run on the CPU (tests/cuda_replay).
//
// Without a GPU the kernels of kernels/cuda compile but never run, so their
// index arithmetic, masks and barriers would first be exercised on a
// device. tools/cuda_replay/replay_source.py turns a .cu file into C++ (a
// launch `K<<<grid, block, shared, stream>>>(args)` becomes
// `Launch(K, grid, block, shared, stream)(args)`, `extern __shared__`
// arrays the block's dynamic shared memory, `__shared__` arrays function
// statics) that includes this header first, and this header gives that
// C++ the CUDA execution model:
//
//   - every thread of a block is a fiber of one host thread (its own
//     stack; cuda_replay.cc switches them); the blocks of a grid run one
//     after another;
//   - a fiber runs until __syncthreads, __syncwarp or a warp exchange
//     (shuffle, ballot, match), which wait for every live thread of the
//     block, or every live lane of the operation's mask; threads that
//     returned no longer count (as on Volta and later). Every waiter of
//     one barrier must have reached it at the same place in the source,
//     with the same mask; a barrier that cannot complete, or that threads
//     reach at different places, aborts with what it found. A shuffle
//     that reads a lane outside its mask, or one that returned, aborts;
//   - between barriers a block's threads run one by one, in increasing or
//     decreasing order (SetThreadOrder; decreasing also runs the grid's
//     blocks last to first), so a read of another thread's write that
//     lacks a barrier sees the write in one order and misses it in the
//     other;
//   - shared memory, static and dynamic, is filled with 0xFF bytes (NaN
//     floats) before every block, so a read of what the block never
//     wrote shows; dynamic shared memory ends at an inaccessible page, so
//     an access past the size the launch asked for faults, and a launch
//     asking for more than 48 KiB without raising the kernel's limit
//     (cudaFuncSetAttribute) aborts, as it fails on a device;
//   - wmma (include/mma.h): each lane computes the whole 16x16 product
//     from the whole tiles, and a store writes only the lane's share of
//     the elements, so a read after a store without __syncwarp misses
//     other lanes' parts; TF32 and bf16 inputs as the tensor cores read
//     them, f32 sums.
//
// What it does not model: timing, the memory model beyond these barriers,
// occupancy and resource limits other than dynamic shared memory, the
// device's math functions (__expf is the host's expf; no FMA
// contraction), alignment of vector loads, accesses past the end of
// global buffers (host vectors). It checks the kernels' logic, not that a
// device runs them: the device tests of tests/cuda do that.
#ifndef TWICE_TESTS_CUDA_REPLAY_CUDA_REPLAY_H_
#define TWICE_TESTS_CUDA_REPLAY_CUDA_REPLAY_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <source_location>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tests/cuda_replay/replay_control.h"

// The CUDA headers give these host meanings (attributes the host compiler
// ignores); here a __shared__ array is one per block, so a static.
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __launch_bounds__(...)

namespace twice::cuda_replay {

struct ThreadContext {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};

// The running fiber's indices (only inside a kernel).
const ThreadContext& Current();
int LaneId();

// `site`: where the source calls the operation; every waiter of one
// barrier must come from the same site.
void SyncThreads(const std::source_location& site);
// Warp operations wait for the live lanes of `mask` (each of which must
// call the same operation with the same mask, as on a device).
void SyncWarp(uint32_t mask, const std::source_location& site);
// Each lane of `mask` passes `value`; returns lane `src`'s (the caller's
// own when `src` is the caller; a source outside the mask's live lanes
// aborts).
uint64_t ExchangeWithLane(uint64_t value, int src, uint32_t mask,
                          const std::source_location& site);
// Each lane of `mask` passes `value`; `values[l]` receives lane l's, and
// the result has bit l set for each live lane of `mask`.
uint32_t ExchangeAll(uint64_t value, uint64_t values[32], uint32_t mask,
                     const std::source_location& site);
// Fills a __shared__ variable with 0xFF bytes the first time a thread of
// the running block declares it.
void FillShared(void* address, size_t bytes);
// The dynamic shared memory limit cudaFuncSetAttribute gave `kernel`.
void SetDynamicSharedLimit(const void* kernel, int bytes);
// The block's dynamic shared memory, 128-byte aligned.
void* DynamicSharedMemory();
// Aborts the test program with `what` unless `ok` (a rule of the device
// the replayed code broke, e.g. a wmma pointer's alignment).
void Require(bool ok, const char* what);

// Runs `body` as every thread of every block of the grid.
// Runs `work` now, or records it into the graph `stream` is capturing
// (replay_runtime.cc).
void Enqueue(cudaStream_t stream, std::function<void()> work);
// With strict device memory (replay_control.h), aborts unless `p` is null,
// device or pinned host memory.
void CheckLaunchPointer(const void* p);

// `kernel` identifies the kernel for its shared memory limit.
void RunGrid(const void* kernel, dim3 grid, dim3 block, size_t shared_bytes,
             const std::function<void()>& body);

template <typename... Params>
class Launcher {
 public:
  Launcher(void (*kernel)(Params...), dim3 grid, dim3 block,
           size_t shared_bytes, cudaStream_t stream)
      : kernel_(kernel),
        grid_(grid),
        block_(block),
        shared_(shared_bytes),
        stream_(stream) {}
  template <typename... Args>
  void operator()(Args&&... args) const {
    // The arguments are copied at the launch, as on a device (a captured
    // launch keeps the values it was queued with).
    std::tuple<std::decay_t<Params>...> values(std::forward<Args>(args)...);
    std::apply([](const auto&... value) { (CheckIfPointer(value), ...); },
               values);
    Enqueue(stream_, [kernel = kernel_, grid = grid_, block = block_,
                      shared = shared_, values = std::move(values)] {
      RunGrid(reinterpret_cast<const void*>(kernel), grid, block, shared,
              [&] { std::apply(kernel, values); });
    });
  }

 private:
  template <typename T>
  static void CheckIfPointer(const T& value) {
    if constexpr (std::is_pointer_v<T>) CheckLaunchPointer(value);
  }

  void (*kernel_)(Params...);
  dim3 grid_, block_;
  size_t shared_;
  cudaStream_t stream_;
};

template <typename... Params>
Launcher<Params...> Launch(void (*kernel)(Params...), dim3 grid, dim3 block,
                           size_t shared_bytes = 0,
                           cudaStream_t stream = nullptr) {
  return Launcher<Params...>(kernel, grid, block, shared_bytes, stream);
}

template <typename T>
uint64_t ToBits(T value) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}
template <typename T>
T FromBits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

}  // namespace twice::cuda_replay

#define threadIdx (::twice::cuda_replay::Current().thread_idx)
#define blockIdx (::twice::cuda_replay::Current().block_idx)
#define blockDim (::twice::cuda_replay::Current().block_dim)
#define gridDim (::twice::cuda_replay::Current().grid_dim)

inline void __syncthreads(
    std::source_location site = std::source_location::current()) {
  ::twice::cuda_replay::SyncThreads(site);
}
inline void __syncwarp(
    unsigned mask = 0xffffffffu,
    std::source_location site = std::source_location::current()) {
  ::twice::cuda_replay::SyncWarp(mask, site);
}

// Each takes where it is called from (the default argument), so that the
// lanes of one exchange are known to have called the same operation.
template <typename T>
T __shfl_sync(unsigned mask, T value, int src_lane, int width = 32,
              std::source_location site = std::source_location::current()) {
  const int lane = ::twice::cuda_replay::LaneId();
  const int src = (lane & ~(width - 1)) + (src_lane & (width - 1));
  return ::twice::cuda_replay::FromBits<T>(
      ::twice::cuda_replay::ExchangeWithLane(
          ::twice::cuda_replay::ToBits(value), src, mask, site));
}
// A lane may read earlier groups of `width` lanes; reading a later one
// gives its own value.
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32,
                  std::source_location site = std::source_location::current()) {
  const int lane = ::twice::cuda_replay::LaneId();
  int src = (lane ^ lane_mask) & 31;
  if ((src & ~(width - 1)) > (lane & ~(width - 1))) src = lane;
  return ::twice::cuda_replay::FromBits<T>(
      ::twice::cuda_replay::ExchangeWithLane(
          ::twice::cuda_replay::ToBits(value), src, mask, site));
}
template <typename T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = 32,
                 std::source_location site = std::source_location::current()) {
  const int lane = ::twice::cuda_replay::LaneId();
  const int src = lane - static_cast<int>(delta);
  const bool inside = src >= (lane & ~(width - 1));
  return ::twice::cuda_replay::FromBits<T>(
      ::twice::cuda_replay::ExchangeWithLane(
          ::twice::cuda_replay::ToBits(value), inside ? src : lane, mask,
          site));
}
inline unsigned __ballot_sync(
    unsigned mask, int predicate,
    std::source_location site = std::source_location::current()) {
  uint64_t values[32];
  const uint32_t live = ::twice::cuda_replay::ExchangeAll(
      predicate != 0 ? 1 : 0, values, mask, site);
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l) {
    if ((live >> l & 1u) && values[l]) bits |= 1u << l;
  }
  return bits & mask;
}
template <typename T>
unsigned __match_any_sync(
    unsigned mask, T value,
    std::source_location site = std::source_location::current()) {
  uint64_t values[32];
  const uint64_t mine = ::twice::cuda_replay::ToBits(value);
  const uint32_t live =
      ::twice::cuda_replay::ExchangeAll(mine, values, mask, site);
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l) {
    if ((live >> l & 1u) && values[l] == mine) bits |= 1u << l;
  }
  return bits & mask;
}

inline float __expf(float x) { return std::exp(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline int __ffs(unsigned x) { return __builtin_ffs(static_cast<int>(x)); }
inline double __longlong_as_double(long long x) {
  return std::bit_cast<double>(x);
}
inline long long __double_as_longlong(double x) {
  return std::bit_cast<long long>(x);
}
// One host thread runs every fiber and switches only at barriers, so a
// read-modify-write is atomic as written.
template <typename T>
T atomicAdd(T* address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}
template <typename T>
T atomicMin(T* address, T value) {
  const T old = *address;
  if (value < old) *address = value;
  return old;
}
using std::isfinite;
using std::isnan;

// The runtime calls of the launchers (a replayed device: SharedMemoryOptin()
// bytes of shared memory per block on opt-in, 132 multiprocessors).
template <typename T>
cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attribute,
                                 int value) {
  if (attribute == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > ::twice::cuda_replay::SharedMemoryOptin()) {
      return cudaErrorInvalidValue;
    }
    ::twice::cuda_replay::SetDynamicSharedLimit(
        reinterpret_cast<const void*>(kernel), value);
  }
  return cudaSuccess;
}

#endif  // TWICE_TESTS_CUDA_REPLAY_CUDA_REPLAY_H_
