// Self-test of the CUDA target: lists the devices. Exits 77 (ctest SKIPPED)
// when no GPU is usable, so a CPU-only run reports skipped, not passed.
#include "kernels/cuda/device_info.h"

#include <cstdio>

int main() {
  const int count = twice::kernels::cuda::DeviceCount();
  if (count == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  for (int i = 0; i < count; ++i) {
    const std::string name = twice::kernels::cuda::DeviceName(i);
    if (name.empty()) {
      std::printf("device %d: properties unavailable\n", i);
      return 1;
    }
    std::printf("device %d: %s\n", i, name.c_str());
  }
  return 0;
}
