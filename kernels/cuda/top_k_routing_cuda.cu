// The mixture-of-experts row moves on CUDA (CPU twins:
// kernels/top_k_routing.h). Both are grid-stride, one output element per
// thread: the gather copies, the combine sums a row's k expert terms in
// the table's (ascending expert) order, so no two threads write one
// element and the result does not depend on the launch.
#include <algorithm>

#include "kernels/cuda/launch.h"

namespace twice::kernels::cuda::launch {
namespace {

constexpr int kRouteThreads = 256;

unsigned RouteBlocks(int64_t work) {
  return static_cast<unsigned>(std::min<int64_t>(
      (work + kRouteThreads - 1) / kRouteThreads, int64_t{1} << 20));
}

__global__ void GatherRowsKernel(const float* src, int64_t cols,
                                 const int32_t* source_row, int64_t n,
                                 float* dst) {
  const int64_t total = n * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = src[int64_t{source_row[i / cols]} * cols + i % cols];
  }
}

__global__ void CombineRoutedRowsKernel(const float* base, const float* routed,
                                        int64_t cols, const int32_t* entry,
                                        const float* gate, int64_t rows, int k,
                                        float scale, float* x) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i % cols;
    float sum = base[i];
    for (int j = 0; j < k; ++j) {
      sum += gate[r * k + j] * routed[int64_t{entry[r * k + j]} * cols + c];
    }
    x[i] += scale * sum;
  }
}

}  // namespace

cudaError_t GatherRows(const float* src, int64_t cols,
                       const int32_t* source_row, int64_t n, float* dst,
                       cudaStream_t stream) {
  GatherRowsKernel<<<RouteBlocks(n * cols), kRouteThreads, 0, stream>>>(
      src, cols, source_row, n, dst);
  return cudaGetLastError();
}

cudaError_t CombineRoutedRows(const float* base, const float* routed,
                              int64_t cols, const int32_t* entry,
                              const float* gate, int64_t rows, int k,
                              float scale, float* x, cudaStream_t stream) {
  CombineRoutedRowsKernel<<<RouteBlocks(rows * cols), kRouteThreads, 0,
                            stream>>>(base, routed, cols, entry, gate, rows, k,
                                      scale, x);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
