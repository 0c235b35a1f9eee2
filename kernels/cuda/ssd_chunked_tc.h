// The chunked SSD's two heavy kernels on tensor cores (ssd_chunked_tc_cuda.cu),
// for SsdChunkedScan (ssd_chunked_cuda.cu): the same functions as its f32
// states and outputs kernels, with every product's inputs rounded to TF32
// (10-bit mantissa) and f32 accumulation.
#ifndef TWICE_KERNELS_CUDA_SSD_CHUNKED_TC_H_
#define TWICE_KERNELS_CUDA_SSD_CHUNKED_TC_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/launch.h"

namespace twice::kernels::cuda::launch {

// Both need SsdTensorCoresSupported (launch.h) shapes.
// Chunks t_begin + c · chunk for c < chunks: S_c into states [chunks, H, P,
// N] (32-byte aligned) and decay_c into decay [chunks, H].
cudaError_t SsdChunkStatesTensorCores(const SsdArgs& args, int64_t t_begin,
                                      int chunk, int64_t chunks, float* states,
                                      float* decay, cudaStream_t stream);

// y of the same chunks from the states entering them, entering [chunks, H,
// P, N] (32-byte aligned).
cudaError_t SsdChunkOutputsTensorCores(const SsdArgs& args, int64_t t_begin,
                                       int chunk, int64_t chunks,
                                       const float* entering,
                                       cudaStream_t stream);

}  // namespace twice::kernels::cuda::launch

#endif  // TWICE_KERNELS_CUDA_SSD_CHUNKED_TC_H_
