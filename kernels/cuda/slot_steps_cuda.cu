// Slot-indexed decode steps on CUDA (CPU twins: kernels/slot_steps.h): one
// launch for every row of a batch, each row's state found through the
// row -> slot map on the device.
//
//   ConvStepSlots   thread per (row, channel): the K taps over the slot's
//                   tail and the row's input (the CPU twin's order), then
//                   the tail shifts by one row
//   SsdStepSlots    grid (H, P / warps, rows): warp per (row, head,
//                   channel p) holding that channel's N state values in
//                   registers (lanes own n = lane + 32 r), as the
//                   recurrent SsdKernel of sequence_cuda.cu with one token
#include <algorithm>

#include "kernels/cuda/launch.h"

namespace twice::kernels::cuda::launch {
namespace {

constexpr int kSlotStepThreads = 256;
constexpr int kMaxSlotStatePerLane = 4;  // N <= 128

unsigned SlotStepBlocks(int64_t work) {
  return static_cast<unsigned>(std::min<int64_t>(
      (work + kSlotStepThreads - 1) / kSlotStepThreads, int64_t{1} << 20));
}

__global__ void ConvStepSlotsKernel(const float* x, int64_t rows,
                                    int64_t channels, int64_t x_stride,
                                    const float* w, int k, float* tails,
                                    const int32_t* slots, float* out) {
  const int64_t total = rows * channels;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / channels;
    const int64_t c = i % channels;
    float* tail = tails + int64_t{slots[r]} * (k - 1) * channels;
    const float xv = x[r * x_stride + c];
    float acc = 0.0f;
    for (int j = 0; j < k - 1; ++j)
      acc += w[c * k + j] * tail[j * channels + c];
    acc += w[c * k + k - 1] * xv;
    out[r * channels + c] = acc;
    for (int j = 0; j + 1 < k - 1; ++j) {
      tail[j * channels + c] = tail[(j + 1) * channels + c];
    }
    tail[int64_t{k - 2} * channels + c] = xv;
  }
}

__device__ __forceinline__ float SlotWarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void SsdStepSlotsKernel(SsdArgs a, const int32_t* slots) {
  const int warps = blockDim.x >> 5;
  const int lane = threadIdx.x & 31;
  const int h = blockIdx.x;
  const int p = blockIdx.y * warps + (threadIdx.x >> 5);
  const int64_t r = blockIdx.z;
  if (p >= a.head_dim) return;
  const int g = h / (a.heads / a.groups);
  const int per = (a.state + 31) / 32;
  const int64_t hp = int64_t{a.heads} * a.head_dim;
  const int64_t ch = int64_t{h} * a.head_dim + p;
  float* s = a.ssm_state + int64_t{slots[r]} * hp * a.state + ch * a.state;
  const float dt = a.dt[r * a.heads + h];
  const float x = a.x[r * a.x_stride + ch];
  const float decay = __expf(dt * a.a[h]);
  const float* bt = a.b + r * a.bc_stride + int64_t{g} * a.state;
  const float* ct = a.c + r * a.bc_stride + int64_t{g} * a.state;
  float dot = 0.0f;
  for (int i = 0; i < per && i < kMaxSlotStatePerLane; ++i) {
    const int n = lane + 32 * i;
    if (n < a.state) {
      const float v = decay * s[n] + dt * x * bt[n];
      s[n] = v;
      dot += v * ct[n];
    }
  }
  dot = SlotWarpSum(dot);
  if (lane == 0) a.y[r * hp + ch] = dot + a.d[h] * x;
}

}  // namespace

cudaError_t ConvStepSlots(const float* x, int64_t rows, int64_t channels,
                          int64_t x_stride, const float* w, int kernel_size,
                          float* tails, const int32_t* slots, float* out,
                          cudaStream_t stream) {
  ConvStepSlotsKernel<<<SlotStepBlocks(rows * channels), kSlotStepThreads, 0,
                        stream>>>(x, rows, channels, x_stride, w, kernel_size,
                                  tails, slots, out);
  return cudaGetLastError();
}

cudaError_t SsdStepSlots(const SsdArgs& args, int64_t rows,
                         const int32_t* slots, cudaStream_t stream) {
  const int warps = kSlotStepThreads / 32;
  const dim3 grid(static_cast<unsigned>(args.heads),
                  static_cast<unsigned>((args.head_dim + warps - 1) / warps),
                  static_cast<unsigned>(rows));
  SsdStepSlotsKernel<<<grid, kSlotStepThreads, 0, stream>>>(args, slots);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
