// Device discovery through the CUDA runtime. Errors become "no device": a
// CPU-only machine with the toolkit installed must still run.
#include <cuda_runtime.h>

#include <cstdio>

#include "kernels/cuda/device_info.h"

namespace twice::kernels::cuda {

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error for later calls
    return 0;
  }
  return count;
}

std::string DeviceName(int index) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  char buf[512];
  std::snprintf(
      buf, sizeof(buf), "%s (sm_%d%d, %.1f GiB)", prop.name, prop.major,
      prop.minor,
      static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

int MultiprocessorCount(int index) {
  int count = 0;
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, index) !=
      cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

}  // namespace twice::kernels::cuda
