// Row-wise and element-wise ops on CUDA: RMSNorm (f32 or bf16 out), rotary
// embedding, SiLU gating (SwiGLU), exact-erf GELU, embedding gather, f32 <->
// bf16 conversion, f16 and int8 weights to bf16 (the one upload of a weight
// that is not stored in bf16).
//
//   RmsNorm   one block per row; sum of squares in double (as the CPU twin),
//             y = (x · rstd) · w.
//   Rope      one thread per (row, head, pair); angle = pos · base^(-2i/hd)
//             in double (long positions keep their precision); row r's
//             pos is start_pos + r, or positions[r] when given (the rows
//             of a batched step, each at its own position).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>

#include "kernels/cuda/launch.h"

namespace twice::kernels::cuda::launch {
namespace {

using bf16 = __nv_bfloat16;

unsigned Blocks(int64_t work, int threads) {
  return static_cast<unsigned>(
      std::min<int64_t>((work + threads - 1) / threads, int64_t{1} << 20));
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 FromFloat<bf16>(float v) {
  return __float2bfloat16(v);
}

// y16 (may be null): y rounded to bf16 as well, a GEMM's input written in
// the same pass (what F32ToBf16 would make of y, bit for bit).
__global__ void RmsNormKernel(const float* x, int dim, const float* w,
                              float eps, float* y, bf16* y16) {
  __shared__ double partial[32];
  const float* xr = x + int64_t{blockIdx.x} * dim;
  float* yr = y + int64_t{blockIdx.x} * dim;
  bf16* y16r = y16 != nullptr ? y16 + int64_t{blockIdx.x} * dim : nullptr;
  double sum = 0.0;
  for (int j = threadIdx.x; j < dim; j += blockDim.x) {
    sum += double{xr[j]} * xr[j];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sum;
  __syncthreads();
  double total = 0.0;
  for (int w_i = 0; w_i < static_cast<int>(blockDim.x >> 5); ++w_i) {
    total += partial[w_i];
  }
  const float rstd = static_cast<float>(1.0 / sqrt(total / dim + eps));
  for (int j = threadIdx.x; j < dim; j += blockDim.x) {
    const float v = (xr[j] * rstd) * w[j];
    yr[j] = v;
    if (y16r != nullptr) y16r[j] = __float2bfloat16(v);
  }
}

__global__ void RopeKernel(float* x, int64_t rows, int64_t row_stride,
                           int heads, int head_dim, int64_t start_pos,
                           const int64_t* positions, float base) {
  const int half = head_dim / 2;
  const int64_t total = rows * heads * half;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int f = static_cast<int>(i % half);
    const int64_t rh = i / half;
    const int h = static_cast<int>(rh % heads);
    const int64_t r = rh / heads;
    const double inv_freq = pow(static_cast<double>(base),
                                -2.0 * f / static_cast<double>(head_dim));
    const int64_t pos = positions != nullptr ? positions[r] : start_pos + r;
    const double angle = static_cast<double>(pos) * inv_freq;
    double s;
    double c;
    sincos(angle, &s, &c);
    float* x1 = x + r * row_stride + int64_t{h} * head_dim + f;
    float* x2 = x1 + half;
    const float a = *x1;
    const float b = *x2;
    const float cf = static_cast<float>(c);
    const float sf = static_cast<float>(s);
    *x1 = a * cf - b * sf;
    *x2 = b * cf + a * sf;
  }
}

__global__ void SiluMulKernel(const float* gate, int64_t gate_stride,
                              const float* mult, int64_t mult_stride,
                              int64_t rows, int64_t cols, float* out) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i % cols;
    const float g = gate[r * gate_stride + c];
    out[i] = g / (1.0f + expf(-g)) * mult[r * mult_stride + c];
  }
}

__global__ void ReluSquaredKernel(float* x, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float u = x[i];
    x[i] = u > 0.0f ? u * u : 0.0f;
  }
}

__global__ void GeluKernel(const float* x, int64_t count, float* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float u = x[i];
    out[i] = 0.5f * u * (1.0f + erff(u * 0.70710678118654752f));
  }
}

// kind: 0 silu(in) · mult, 1 relu(in)², 2 exact GELU (the three kernels
// above, term for term), written as bf16 only.
__global__ void ActivationToBf16Kernel(int kind, const float* in,
                                       int64_t in_stride, const float* mult,
                                       int64_t mult_stride, int64_t rows,
                                       int64_t cols, bf16* out) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i % cols;
    const float u = in[r * in_stride + c];
    float v;
    if (kind == 0) {
      v = u / (1.0f + expf(-u)) * mult[r * mult_stride + c];
    } else if (kind == 1) {
      v = u > 0.0f ? u * u : 0.0f;
    } else {
      v = 0.5f * u * (1.0f + erff(u * 0.70710678118654752f));
    }
    out[i] = __float2bfloat16(v);
  }
}

__global__ void EmbeddingKernel(const int32_t* ids, int64_t rows,
                                const bf16* table, int64_t dim, float scale,
                                float* out) {
  const int64_t total = rows * dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / dim;
    const float v = __bfloat162float(table[int64_t{ids[r]} * dim + i % dim]);
    out[i] = scale == 1.0f ? v : v * scale;
  }
}

__global__ void F32ToBf16Kernel(const float* x, int64_t count, bf16* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __float2bfloat16(x[i]);
  }
}

__global__ void Bf16ToF32Kernel(const bf16* x, int64_t count, float* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __bfloat162float(x[i]);
  }
}

__global__ void F16ToBf16Kernel(const __half* x, int64_t count, bf16* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __float2bfloat16(__half2float(x[i]));
  }
}

// Row r of an int8 weight stands for values[r, :] * scales[r].
__global__ void I8RowsToBf16Kernel(const int8_t* values, const float* scales,
                                   int64_t rows, int64_t cols, bf16* out) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    // Blocks of 64 elements of a row (kernels/dtype.h's kI8Block).
    const int64_t r = i / cols;
    const int64_t blocks = (cols + 63) / 64;
    const float scale = scales[r * blocks + (i - r * cols) / 64];
    out[i] = __float2bfloat16(static_cast<float>(values[i]) * scale);
  }
}

// splitmix64 of (seed, i): a uniform in [-scale, scale).
__device__ __forceinline__ float HashUniform(uint64_t seed, int64_t i,
                                             float scale) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
  return (2.0f * u - 1.0f) * scale;
}

template <typename T>
__global__ void FillUniformKernel(T* x, int64_t count, uint64_t seed,
                                  float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = FromFloat<T>(HashUniform(seed, i, scale));
  }
}

}  // namespace

cudaError_t RmsNorm(const float* x, int64_t rows, int dim, const float* w,
                    float eps, float* y, bf16_bits* y16, cudaStream_t stream) {
  RmsNormKernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(
      x, dim, w, eps, y, reinterpret_cast<bf16*>(y16));
  return cudaGetLastError();
}

cudaError_t RopeRotateHalf(float* x, int64_t rows, int64_t row_stride,
                           int heads, int head_dim, int64_t start_pos,
                           float base, cudaStream_t stream) {
  RopeKernel<<<Blocks(rows * heads * (head_dim / 2), 256), 256, 0, stream>>>(
      x, rows, row_stride, heads, head_dim, start_pos, nullptr, base);
  return cudaGetLastError();
}

cudaError_t RopeRotateHalfAt(float* x, int64_t rows, int64_t row_stride,
                             int heads, int head_dim, const int64_t* positions,
                             float base, cudaStream_t stream) {
  RopeKernel<<<Blocks(rows * heads * (head_dim / 2), 256), 256, 0, stream>>>(
      x, rows, row_stride, heads, head_dim, 0, positions, base);
  return cudaGetLastError();
}

cudaError_t SiluMul(const float* gate, int64_t gate_stride, const float* mult,
                    int64_t mult_stride, int64_t rows, int64_t cols, float* out,
                    cudaStream_t stream) {
  SiluMulKernel<<<Blocks(rows * cols, 256), 256, 0, stream>>>(
      gate, gate_stride, mult, mult_stride, rows, cols, out);
  return cudaGetLastError();
}

cudaError_t ReluSquared(float* x, int64_t count, cudaStream_t stream) {
  ReluSquaredKernel<<<Blocks(count, 256), 256, 0, stream>>>(x, count);
  return cudaGetLastError();
}

cudaError_t Gelu(const float* x, int64_t count, float* out,
                 cudaStream_t stream) {
  GeluKernel<<<Blocks(count, 256), 256, 0, stream>>>(x, count, out);
  return cudaGetLastError();
}

cudaError_t ActivationToBf16(int kind, const float* in, int64_t in_stride,
                             const float* mult, int64_t mult_stride,
                             int64_t rows, int64_t cols, bf16_bits* out,
                             cudaStream_t stream) {
  ActivationToBf16Kernel<<<Blocks(rows * cols, 256), 256, 0, stream>>>(
      kind, in, in_stride, mult, mult_stride, rows, cols,
      reinterpret_cast<bf16*>(out));
  return cudaGetLastError();
}

cudaError_t Embedding(const int32_t* ids, int64_t rows, const bf16_bits* table,
                      int64_t dim, float scale, float* out,
                      cudaStream_t stream) {
  EmbeddingKernel<<<Blocks(rows * dim, 256), 256, 0, stream>>>(
      ids, rows, reinterpret_cast<const bf16*>(table), dim, scale, out);
  return cudaGetLastError();
}

cudaError_t F32ToBf16(const float* x, int64_t count, bf16_bits* out,
                      cudaStream_t stream) {
  F32ToBf16Kernel<<<Blocks(count, 256), 256, 0, stream>>>(
      x, count, reinterpret_cast<bf16*>(out));
  return cudaGetLastError();
}

cudaError_t Bf16ToF32(const bf16_bits* x, int64_t count, float* out,
                      cudaStream_t stream) {
  Bf16ToF32Kernel<<<Blocks(count, 256), 256, 0, stream>>>(
      reinterpret_cast<const bf16*>(x), count, out);
  return cudaGetLastError();
}

cudaError_t F16ToBf16(const uint16_t* x, int64_t count, bf16_bits* out,
                      cudaStream_t stream) {
  F16ToBf16Kernel<<<Blocks(count, 256), 256, 0, stream>>>(
      reinterpret_cast<const __half*>(x), count, reinterpret_cast<bf16*>(out));
  return cudaGetLastError();
}

cudaError_t I8RowsToBf16(const int8_t* values, const float* scales,
                         int64_t rows, int64_t cols, bf16_bits* out,
                         cudaStream_t stream) {
  I8RowsToBf16Kernel<<<Blocks(rows * cols, 256), 256, 0, stream>>>(
      values, scales, rows, cols, reinterpret_cast<bf16*>(out));
  return cudaGetLastError();
}

cudaError_t FillUniformF32(float* x, int64_t count, uint64_t seed, float scale,
                           cudaStream_t stream) {
  FillUniformKernel<float>
      <<<Blocks(count, 256), 256, 0, stream>>>(x, count, seed, scale);
  return cudaGetLastError();
}

cudaError_t FillUniformBf16(bf16_bits* x, int64_t count, uint64_t seed,
                            float scale, cudaStream_t stream) {
  FillUniformKernel<bf16><<<Blocks(count, 256), 256, 0, stream>>>(
      reinterpret_cast<bf16*>(x), count, seed, scale);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
