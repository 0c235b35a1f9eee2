#include "kernels/cpu/blas_threads.h"

#include <mutex>

// Deliberately not including <cblas.h>: each library declares its setter
// (without `weak`) in its own header.
extern "C" {
void openblas_set_num_threads(int num_threads) __attribute__((weak));
// BLIS: dim_t is a 64-bit integer in Debian's builds.
void bli_thread_set_num_threads(long num_threads)  // NOLINT(runtime/int)
    __attribute__((weak));
}

namespace twice::kernels::cpu {
namespace {

// Also at program start, not only when the pool is first made: small
// problems call BLAS inline without ever touching the pool, and must not
// start BLAS's own threads either. (Shared libraries are initialised before
// this, so the BLAS is ready.)
[[maybe_unused]] const bool kSingleThreadedAtStart = [] {
  SetBlasSingleThreaded();
  return true;
}();

}  // namespace

void SetBlasSingleThreaded() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (openblas_set_num_threads != nullptr) openblas_set_num_threads(1);
    if (bli_thread_set_num_threads != nullptr) bli_thread_set_num_threads(1);
  });
}

}  // namespace twice::kernels::cpu
