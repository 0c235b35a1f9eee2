// Where this process runs its kernels (--device): "cpu", or "cuda" for the
// CUDA kernel backend on GPU 0 (kernels/cuda/cuda_kernel_backend.h), which
// every model the engine loads then uses. Process-wide: call once at
// startup, before any model runs.
#ifndef TWICE_SERVICES_SERVER_KERNEL_DEVICE_H_
#define TWICE_SERVICES_SERVER_KERNEL_DEVICE_H_

#include <string>

#include "absl/status/statusor.h"

namespace twice::services {

// Installs the device's kernel backend and returns its name ("cpu" or
// "cuda:0 (<GPU>)"). FAILED_PRECONDITION for "cuda" in a build without
// CUDA or on a machine without a usable GPU; INVALID_ARGUMENT for any other
// name.
[[nodiscard]] absl::StatusOr<std::string> UseKernelDevice(
    const std::string& device);

}  // namespace twice::services

#endif  // TWICE_SERVICES_SERVER_KERNEL_DEVICE_H_
