// CublasLtLibrary: the cuBLASLt entry points GemmRunner uses, resolved with
// dlopen/dlsym on first use instead of linked at load time.
//
// Why: libcublasLt carries about 94 KB of thread-local storage. Linked
// into a binary, that TLS is reserved at the top of EVERY thread's stack,
// and libraries that start threads with small fixed stacks stop working —
// Debian's civetweb (the /metrics server) creates its workers with 100 KB
// stacks and pthread_create then fails. Loaded with dlopen, the TLS is
// allocated on demand by the threads that use cuBLASLt, so a CPU-only
// process, and every thread of a CUDA one that never calls cuBLASLt, pays
// nothing.
//
// Thread safety: the first successful load is published once; later calls
// return the same table.
#ifndef TWICE_KERNELS_CUDA_CUBLASLT_LIBRARY_H_
#define TWICE_KERNELS_CUDA_CUBLASLT_LIBRARY_H_

#include <cublasLt.h>

#include "absl/status/statusor.h"

namespace twice::kernels::cuda {

struct CublasLtLibrary {
  decltype(&cublasLtCreate) Create = nullptr;
  decltype(&cublasLtDestroy) Destroy = nullptr;
  decltype(&cublasLtMatmul) Matmul = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic = nullptr;
  decltype(&cublasLtMatmulDescCreate) MatmulDescCreate = nullptr;
  decltype(&cublasLtMatmulDescDestroy) MatmulDescDestroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute =
      nullptr;
  decltype(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy = nullptr;
};

// Loads libcublasLt.so.<major of the headers> (the dynamic loader's search
// path, then the toolkit's library directory this build was configured
// with). FAILED_PRECONDITION naming the library and dlerror() when it or a
// symbol is missing. Never unloaded.
[[nodiscard]] absl::StatusOr<const CublasLtLibrary*> LoadCublasLt();

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_CUBLASLT_LIBRARY_H_
