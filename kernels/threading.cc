#include "kernels/threading.h"

#include "kernels/check.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/status_macros.h"

namespace twice::kernels {

absl::Status SetCpuThreads(int threads) {
  TWICE_RETURN_IF_ERROR(CheckArg(threads >= 1 && threads <= 256,
                                 "SetCpuThreads", "need 1 <= threads <= 256"));
  cpu::ThreadPool& pool = cpu::DefaultPool();
  if (pool.threads() != threads) pool.Resize(threads);
  return absl::OkStatus();
}

int CpuThreads() { return cpu::DefaultPool().threads(); }

}  // namespace twice::kernels
