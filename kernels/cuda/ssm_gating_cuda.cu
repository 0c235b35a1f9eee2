// The Mamba-2 gating steps on CUDA (CPU twins: kernels/ssm_gating.h).
//
//   BiasSiluRows, SoftplusBiasRows   grid-stride, one element per thread
//   GatedGroupRmsNorm   one block per (row, group): v = y · SiLU(z) kept in
//                       out, sum of squares in double (as the CPU twin),
//                       then out = v · rstd · w
#include <algorithm>

#include "kernels/cuda/launch.h"

namespace twice::kernels::cuda::launch {
namespace {

constexpr float kSoftplusThresholdDevice = 20.0f;  // kernels/ssm_gating.h

unsigned GatingBlocks(int64_t work, int threads) {
  return static_cast<unsigned>(
      std::min<int64_t>((work + threads - 1) / threads, int64_t{1} << 20));
}

__global__ void BiasSiluRowsKernel(float* x, int64_t rows, int64_t cols,
                                   const float* bias) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i] + bias[i % cols];
    x[i] = v / (1.0f + expf(-v));
  }
}

__global__ void SoftplusBiasRowsKernel(const float* raw, int64_t rows,
                                       int64_t stride, int64_t cols,
                                       const float* bias, float* out) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i % cols;
    const float v = raw[r * stride + c] + bias[c];
    out[i] = v > kSoftplusThresholdDevice ? v : log1pf(expf(v));
  }
}

// blockIdx.x = row * groups + group; 256 threads.
__global__ void GatedGroupRmsNormKernel(const float* z, int64_t z_stride,
                                        const float* y, int64_t width,
                                        int64_t groups, const float* w,
                                        double eps, float* out) {
  __shared__ double partial[32];
  const int64_t row = blockIdx.x / groups;
  const int64_t group = blockIdx.x % groups;
  const int64_t size = width / groups;
  const int64_t first = group * size;
  const float* zr = z + row * z_stride + first;
  const float* yr = y + row * width + first;
  float* vr = out + row * width + first;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
    const float g = zr[i];
    const float v = g / (1.0f + expf(-g)) * yr[i];
    vr[i] = v;  // out may alias y: each element is read before it is written
    sum += double{v} * v;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sum;
  __syncthreads();
  double total = 0.0;
  for (int k = 0; k < static_cast<int>(blockDim.x >> 5); ++k) {
    total += partial[k];
  }
  const float rstd =
      static_cast<float>(1.0 / sqrt(total / static_cast<double>(size) + eps));
  for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
    vr[i] = vr[i] * rstd * w[first + i];
  }
}

}  // namespace

cudaError_t BiasSiluRows(float* x, int64_t rows, int64_t cols,
                         const float* bias, cudaStream_t stream) {
  BiasSiluRowsKernel<<<GatingBlocks(rows * cols, 256), 256, 0, stream>>>(
      x, rows, cols, bias);
  return cudaGetLastError();
}

cudaError_t SoftplusBiasRows(const float* raw, int64_t rows, int64_t stride,
                             int64_t cols, const float* bias, float* out,
                             cudaStream_t stream) {
  SoftplusBiasRowsKernel<<<GatingBlocks(rows * cols, 256), 256, 0, stream>>>(
      raw, rows, stride, cols, bias, out);
  return cudaGetLastError();
}

cudaError_t GatedGroupRmsNorm(const float* z, int64_t z_stride, const float* y,
                              int64_t rows, int64_t width, int64_t groups,
                              const float* w, double eps, float* out,
                              cudaStream_t stream) {
  // One block per (row, group); rows · groups <= 2^31 - 1 is checked by
  // the caller.
  GatedGroupRmsNormKernel<<<static_cast<unsigned>(rows * groups), 256, 0,
                            stream>>>(z, z_stride, y, width, groups, w, eps,
                                      out);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
