// The raw launch arguments of the SSD kernels (launch.h SsdArgs) from the
// validated device spans of cuda_ops.h. Internal to twice_kernels_cuda.
#ifndef TWICE_KERNELS_CUDA_SSD_ARGS_H_
#define TWICE_KERNELS_CUDA_SSD_ARGS_H_

#include <cstdint>

#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/launch.h"
#include "kernels/ssd_chunk_scan.h"

namespace twice::kernels::cuda {

inline launch::SsdArgs MakeSsdArgs(
    const SsdShape& s, int64_t tokens, DeviceSpan<const float> x,
    int64_t x_stride, DeviceSpan<const float> b, DeviceSpan<const float> c,
    int64_t bc_stride, DeviceSpan<const float> dt, DeviceSpan<const float> a,
    DeviceSpan<const float> d, DeviceSpan<float> state, DeviceSpan<float> y) {
  launch::SsdArgs args;
  args.heads = static_cast<int>(s.heads);
  args.head_dim = static_cast<int>(s.head_dim);
  args.groups = static_cast<int>(s.groups);
  args.state = static_cast<int>(s.state);
  args.tokens = tokens;
  args.x = x.data;
  args.x_stride = x_stride;
  args.b = b.data;
  args.c = c.data;
  args.bc_stride = bc_stride;
  args.dt = dt.data;
  args.a = a.data;
  args.d = d.data;
  args.ssm_state = state.data;
  args.y = y.data;
  return args;
}

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_SSD_ARGS_H_
