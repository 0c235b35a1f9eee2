// Where this process runs its kernels: "cpu", or "cuda" for the CUDA kernel
// backend on GPU 0 (kernels/cuda/cuda_kernel_backend.h), which every model
// the engine loads then uses. Process-wide: call once at startup, before
// any model runs (twice-server's --device).
#ifndef TWICE_ENGINE_RUNTIME_KERNEL_DEVICE_H_
#define TWICE_ENGINE_RUNTIME_KERNEL_DEVICE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace twice::engine {

// Installs the device's kernel backend and returns its name ("cpu" or
// "cuda:0 (<GPU>)"). FAILED_PRECONDITION for "cuda" in a build without
// CUDA or on a machine without a usable GPU; INVALID_ARGUMENT for any other
// name.
[[nodiscard]] absl::StatusOr<std::string> UseKernelDevice(
    const std::string& device);

// Kernel calls the installed device backend ran and declined (run on the
// CPU) since it was installed, and the bytes it moved between host and
// device (kernels/kernel_stats.h); nullopt when the kernels run on the CPU.
struct KernelDeviceCounts {
  int64_t device_calls = 0;
  int64_t cpu_fallbacks = 0;
  int64_t bytes_to_device = 0;
  int64_t bytes_to_host = 0;
  int64_t weight_bytes_to_device = 0;
};
std::optional<KernelDeviceCounts> KernelDeviceStats();

}  // namespace twice::engine

#endif  // TWICE_ENGINE_RUNTIME_KERNEL_DEVICE_H_
