#include "engine/runtime/kernel_device.h"

#include <memory>

#include "kernels/backend.h"
#if TWICE_HAVE_CUDA
#include "kernels/cuda/cuda_kernel_backend.h"
#endif

namespace twice::engine {

absl::StatusOr<std::string> UseKernelDevice(const std::string& device) {
  if (device == "cpu") {
    kernels::SetKernelBackend(nullptr);
    return std::string("cpu");
  }
  if (device != "cuda") {
    return absl::InvalidArgumentError("device must be cpu or cuda, got \"" +
                                      device + "\"");
  }
#if TWICE_HAVE_CUDA
  absl::StatusOr<std::shared_ptr<kernels::cuda::CudaKernelBackend>> backend =
      kernels::cuda::CudaKernelBackend::Create(0);
  if (!backend.ok()) {
    return absl::FailedPreconditionError(
        "device cuda: " + std::string(backend.status().message()) +
        "; use the cpu device (--device=cpu) on this machine");
  }
  std::string name = (*backend)->name();
  kernels::SetKernelBackend(*std::move(backend));
  return name;
#else
  return absl::FailedPreconditionError(
      "device cuda: this build of Twice has no CUDA kernels (configured "
      "with TWICE_WITH_CUDA=OFF or without nvcc); rebuild with CUDA or use "
      "the cpu device (--device=cpu)");
#endif
}

std::optional<KernelDeviceCounts> KernelDeviceStats() {
  std::shared_ptr<kernels::KernelBackend> backend =
      kernels::ActiveKernelBackend();
  if (backend == nullptr) return std::nullopt;
  const kernels::KernelBackendStats stats = backend->stats();
  return KernelDeviceCounts{stats.device_calls, stats.cpu_fallbacks,
                            stats.bytes_to_device, stats.bytes_to_host,
                            stats.weight_bytes_to_device};
}

}  // namespace twice::engine
