#include "engine/executor/executor_device.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<ExecutorDevice>> NewCudaExecutorDevice(
    int ordinal) {
  (void)ordinal;
  return absl::FailedPreconditionError(
      "cuda executor: this build of Twice has no CUDA kernels (configured "
      "with TWICE_WITH_CUDA=OFF or without nvcc)");
}

}  // namespace twice::engine
