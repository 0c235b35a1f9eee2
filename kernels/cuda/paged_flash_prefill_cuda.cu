// Causal attention of a prefill pass over the paged KV cache on tensor cores
// (CPU twin: kernels/paged_attention.h PagedCausalAttention), for head dims
// 64 and 128: block per (64 consecutive query rows, head), 4 warps of 16
// rows. The block walks positions 0 .. its last row's in tiles of 64: the
// tile's keys and values come from the pool's blocks (table row 0, as any
// prefill pass) rounded to bf16 into shared memory, and FlashTile
// (flash_tile.cuh) runs S = Q K^T and O += P V as wmma products with f32
// accumulation and the online softmax between them (keys past a row's
// position weighing 0). Rows are written f32, divided by their sum.
//
// Why bf16: the products are what a long prefill's attention costs
// (2·T²·hd per head), and the CUDA-core tile kernel (paged_attention_cuda.cu)
// computes them at a small fraction of the tensor cores' rate; bf16 inputs
// with f32 accumulation are what flash attention runs on.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/flash_tile.cuh"
#include "kernels/cuda/launch.h"

namespace twice::kernels::cuda::launch {
namespace {

template <int HD>
__global__ void __launch_bounds__(kFlashWarps * 32)
    PagedFlashPrefillKernel(PagedRowsArgs a, const float* q, int64_t q_stride,
                            const float* k_pool, const float* v_pool,
                            float scale, float* out) {
  extern __shared__ __align__(128) unsigned char smem[];
  FlashTile<HD> tile(smem);
  const int h = blockIdx.y;
  const int64_t kv_row = int64_t{a.kv_heads} * HD;
  const int64_t kv_off = int64_t{h / (a.heads / a.kv_heads)} * HD;
  const int64_t first = int64_t{blockIdx.x} * kFlashRows;
  const int64_t last =
      (first + kFlashRows < a.rows ? first + kFlashRows : a.rows) - 1;
  const int64_t last_p = a.start + last;  // the block's last row's position

  for (int i = threadIdx.x; i < kFlashRows * HD; i += blockDim.x) {
    const int64_t row = first + i / HD;
    tile.q[i] = __float2bfloat16(
        row <= last ? q[row * q_stride + int64_t{h} * HD + i % HD] : 0.0f);
  }
  tile.Reset();
  // Row i (of the block) at position start + first + i sees positions up to
  // its own; rows past the pass see none.
  const auto sees = [&](int i, int64_t pos) {
    return first + i <= last && pos <= a.start + first + i;
  };
  for (int64_t k0 = 0; k0 <= last_p; k0 += kFlashKeys) {
    __syncthreads();  // the previous tile's keys and values are read
    for (int i = threadIdx.x; i < kFlashKeys * HD; i += blockDim.x) {
      const int64_t pos = k0 + i / HD;
      float k = 0.0f, v = 0.0f;
      if (pos <= last_p) {
        const int64_t at =
            (int64_t{a.table[pos / a.block_size]} * a.block_size +
             pos % a.block_size) *
                kv_row +
            kv_off + i % HD;
        k = k_pool[at];
        v = v_pool[at];
      }
      tile.k[i] = __float2bfloat16(k);
      tile.v[i] = __float2bfloat16(v);
    }
    __syncthreads();
    tile.Update((threadIdx.x >> 5) * 16, k0, scale, sees);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kFlashRows * HD; i += blockDim.x) {
    const int64_t row = first + i / HD;
    // Position 0 is every row's: its sum is positive.
    if (row <= last)
      out[(row * a.heads + h) * HD + i % HD] = tile.Out(i / HD, i % HD);
  }
}

template <int HD>
cudaError_t Launch(const PagedRowsArgs& rows, const float* q, int64_t q_stride,
                   const float* k_pool, const float* v_pool, float scale,
                   float* out, cudaStream_t stream) {
  // One size per kernel instance, so concurrent callers ask for the same.
  if (const cudaError_t e = cudaFuncSetAttribute(
          PagedFlashPrefillKernel<HD>,
          cudaFuncAttributeMaxDynamicSharedMemorySize, FlashTile<HD>::kBytes);
      e != cudaSuccess) {
    return e;
  }
  const dim3 grid(
      static_cast<unsigned>((rows.rows + kFlashRows - 1) / kFlashRows),
      static_cast<unsigned>(rows.heads));
  PagedFlashPrefillKernel<HD>
      <<<grid, kFlashWarps * 32, FlashTile<HD>::kBytes, stream>>>(
          rows, q, q_stride, k_pool, v_pool, scale, out);
  return cudaGetLastError();
}

}  // namespace

bool PagedFlashPrefillSupported(int head_dim) {
  if (head_dim != 64 && head_dim != 128) return false;
  // Head dim 128 asks for 105 KiB of shared memory, more than some GPUs
  // give a block (99 KiB on sm_86 / sm_89): those run the CUDA-core tiles.
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                             device) != cudaSuccess) {
    return false;
  }
  const int bytes =
      head_dim == 64 ? FlashTile<64>::kBytes : FlashTile<128>::kBytes;
  return optin >= bytes;
}

cudaError_t PagedFlashPrefill(const PagedRowsArgs& rows, const float* q,
                              int64_t q_stride, const float* k_pool,
                              const float* v_pool, float scale, float* out,
                              cudaStream_t stream) {
  if (rows.positions != nullptr || rows.heads > 65535) {
    return cudaErrorInvalidValue;
  }
  switch (rows.head_dim) {
    case 64:
      return Launch<64>(rows, q, q_stride, k_pool, v_pool, scale, out, stream);
    case 128:
      return Launch<128>(rows, q, q_stride, k_pool, v_pool, scale, out, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace twice::kernels::cuda::launch
