// Device discovery for the CUDA kernels. Never fails: a machine without a
// driver or GPU simply has zero devices.
#ifndef TWICE_KERNELS_CUDA_DEVICE_INFO_H_
#define TWICE_KERNELS_CUDA_DEVICE_INFO_H_

#include <string>

namespace twice::kernels::cuda {

// Number of usable CUDA devices; 0 when the runtime reports any error
// (no driver, driver too old, no device).
int DeviceCount();

// "<name> (sm_<major><minor>, <GiB> GiB)" for device `index`, or an empty
// string when it cannot be queried.
std::string DeviceName(int index);

// Streaming multiprocessors of device `index`, or 0 when it cannot be
// queried.
int MultiprocessorCount(int index);

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_DEVICE_INFO_H_
