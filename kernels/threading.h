// Threads of the CPU kernels.
//
// Every CPU kernel splits its work (GEMM columns, heads, rows, query blocks)
// over one process-wide pool of long-lived threads; BLAS itself runs one
// thread per call inside it, so the two never oversubscribe the CPUs.
//
// Default: the value of the environment variable TWICE_CPU_THREADS when it is
// a positive integer, else the number of CPUs this process may run on
// (sched_getaffinity). One kernel call uses the whole pool; a kernel called
// while another thread's kernel holds the pool runs on its caller's thread
// alone, so concurrent callers stay correct but do not speed each other up.
#ifndef TWICE_KERNELS_THREADING_H_
#define TWICE_KERNELS_THREADING_H_

#include "absl/status/status.h"

namespace twice::kernels {

// INVALID_ARGUMENT unless 1 <= threads <= 256. Waits for a running kernel
// to finish, then restarts the pool's workers; cheap enough for a benchmark
// sweep, not meant to be called per request.
[[nodiscard]] absl::Status SetCpuThreads(int threads);

// Threads the pool runs (caller included).
int CpuThreads();

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_THREADING_H_
