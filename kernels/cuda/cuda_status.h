// CUDA runtime and cuBLASLt errors as absl::Status. This is the one place
// where foreign GPU error codes are converted (style guideline 4):
//   cudaErrorMemoryAllocation, CUBLAS_STATUS_ALLOC_FAILED -> RESOURCE_EXHAUSTED
//   no device / driver too old / device unavailable       ->
//   FAILED_PRECONDITION invalid value / configuration, not supported ->
//   INVALID_ARGUMENT everything else (launch failure, illegal address, ...) ->
//   INTERNAL
// Messages name the failing call: "<what>: <cuda error name>: <string>".
#ifndef TWICE_KERNELS_CUDA_CUDA_STATUS_H_
#define TWICE_KERNELS_CUDA_CUDA_STATUS_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace twice::kernels::cuda {

[[nodiscard]] absl::Status CudaStatus(cudaError_t error, const char* what);
[[nodiscard]] absl::Status CublasStatus(cublasStatus_t status,
                                        const char* what);

// The sticky or pending error of the last launch on this thread (clears it).
[[nodiscard]] absl::Status LastLaunchStatus(const char* what);

}  // namespace twice::kernels::cuda

// Returns CudaStatus(expr, #expr) from the enclosing function on error.
#define TWICE_CUDA_RETURN_IF_ERROR(expr)                                   \
  do {                                                                     \
    if (const cudaError_t twice_cuda_error_ = (expr);                      \
        twice_cuda_error_ != cudaSuccess) {                                \
      return ::twice::kernels::cuda::CudaStatus(twice_cuda_error_, #expr); \
    }                                                                      \
  } while (false)

#define TWICE_CUBLAS_RETURN_IF_ERROR(expr)                              \
  do {                                                                  \
    if (const cublasStatus_t twice_cublas_status_ = (expr);             \
        twice_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                \
      return ::twice::kernels::cuda::CublasStatus(twice_cublas_status_, \
                                                  #expr);               \
    }                                                                   \
  } while (false)

#endif  // TWICE_KERNELS_CUDA_CUDA_STATUS_H_
