// The raw launch arguments of the SSD kernels (launch.h SsdArgs) from the
// validated device spans of cuda_ops.h. Internal to twice_kernels_cuda.
#ifndef TWICE_KERNELS_CUDA_SSD_ARGS_H_
#define TWICE_KERNELS_CUDA_SSD_ARGS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/check.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/launch.h"
#include "kernels/ssd_chunk_scan.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {

// The checks every SSD scan's rows share: the shape the kernels take (N <=
// 128, G divides H, H and P <= 65535) and x, B, C, dt, A, D and y holding
// `rows` rows.
[[nodiscard]] inline absl::Status CheckSsdRows(
    const char* op, const SsdShape& s, int64_t rows, int64_t x_size,
    int64_t x_stride, int64_t b_size, int64_t c_size, int64_t bc_stride,
    int64_t dt_size, int64_t a_size, int64_t d_size, int64_t y_size) {
  TWICE_RETURN_IF_ERROR(
      CheckArg(s.heads >= 1 && s.head_dim >= 1 && s.groups >= 1 &&
                   s.state >= 1 && s.state <= 128 && s.heads % s.groups == 0 &&
                   rows >= 0 && s.heads <= 65535 && s.head_dim <= 65535,
               op, "bad shape (N <= 128, G divides H, H and P <= 65535)"));
  const int64_t hp = s.heads * s.head_dim;
  const int64_t gn = s.groups * s.state;
  TWICE_RETURN_IF_ERROR(
      CheckArg(x_stride >= hp && bc_stride >= gn, op, "row stride too small"));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(op, "x", x_size, StridedExtent(rows, hp, x_stride)));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(op, "b", b_size, StridedExtent(rows, gn, bc_stride)));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(op, "c", c_size, StridedExtent(rows, gn, bc_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(op, "dt", dt_size, rows * s.heads));
  TWICE_RETURN_IF_ERROR(CheckSize(op, "a", a_size, s.heads));
  TWICE_RETURN_IF_ERROR(CheckSize(op, "d", d_size, s.heads));
  return CheckSize(op, "y", y_size, rows * hp);
}

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
