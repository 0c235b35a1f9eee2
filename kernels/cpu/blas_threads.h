// BLAS threading control, independent of which BLAS is linked.
//
// The CPU kernels parallelise with their own pool (thread_pool.h) and call
// BLAS from inside its tasks; a BLAS that also spawned threads per call
// would oversubscribe the CPUs. So BLAS runs single-threaded in this
// process. The library-specific setters (OpenBLAS, BLIS) are weak
// references, so the kernels link against either, or a reference BLAS
// without any.
#ifndef TWICE_KERNELS_CPU_BLAS_THREADS_H_
#define TWICE_KERNELS_CPU_BLAS_THREADS_H_

namespace twice::kernels::cpu {

// Makes every later BLAS call run on its calling thread. Idempotent. Runs
// once at program start (blas_threads.cc) and again when the pool is made;
// callable explicitly before any other code drives BLAS from threads.
void SetBlasSingleThreaded();

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_BLAS_THREADS_H_
