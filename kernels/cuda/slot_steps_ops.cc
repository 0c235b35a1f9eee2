// Validating wrappers of the slot-indexed step kernels (cuda_ops.h), with
// the checks of their CPU twins (kernels/slot_steps.h).
#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/ssd_args.h"
#include "kernels/slot_steps.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {
namespace {

constexpr int64_t kMaxSlotRows = 65535;  // one grid dimension

absl::Status CheckDeviceRows(const char* op, const DeviceSlotRows& slots) {
  const int64_t rows = static_cast<int64_t>(slots.host.size());
  if (slots.device.size != rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": the device slot map has ", slots.device.size,
                     " rows, the host copy ", rows));
  }
  return CheckArg(rows <= kMaxSlotRows, op, "more than 65535 rows");
}

}  // namespace

absl::Status CausalConv1dStepSlots(const Stream& stream,
                                   DeviceSpan<const float> x, int64_t channels,
                                   int64_t x_stride,
                                   DeviceSpan<const float> weight,
                                   int64_t kernel_size, DeviceSpan<float> tails,
                                   const DeviceSlotRows& slots,
                                   DeviceSpan<float> out) {
  constexpr char kOp[] = "CausalConv1dStepSlots";
  TWICE_RETURN_IF_ERROR(CheckConvStepSlots(x.size, channels, x_stride,
                                           weight.size, kernel_size, tails.size,
                                           slots.host, out.size));
  TWICE_RETURN_IF_ERROR(CheckDeviceRows(kOp, slots));
  if (slots.host.empty()) return absl::OkStatus();
  return CudaStatus(
      launch::ConvStepSlots(x.data, static_cast<int64_t>(slots.host.size()),
                            channels, x_stride, weight.data,
                            static_cast<int>(kernel_size), tails.data,
                            slots.device.data, out.data, stream.get()),
      kOp);
}

absl::Status SsdStepSlots(const Stream& stream, const SsdShape& shape,
                          DeviceSpan<const float> x, int64_t x_stride,
                          DeviceSpan<const float> b, DeviceSpan<const float> c,
                          int64_t bc_stride, DeviceSpan<const float> dt,
                          DeviceSpan<const float> a, DeviceSpan<const float> d,
                          DeviceSpan<float> states, const DeviceSlotRows& slots,
                          DeviceSpan<float> y) {
  constexpr char kOp[] = "SsdStepSlots";
  TWICE_RETURN_IF_ERROR(CheckSsdStepSlots(
      shape, x.size, x_stride, b.size, c.size, bc_stride, dt.size, a.size,
      d.size, states.size, slots.host, y.size));
  TWICE_RETURN_IF_ERROR(CheckDeviceRows(kOp, slots));
  TWICE_RETURN_IF_ERROR(CheckArg(shape.state <= 128 && shape.heads <= 65535,
                                 kOp, "state dimension N > 128"));
  if (slots.host.empty()) return absl::OkStatus();
  const launch::SsdArgs args =
      MakeSsdArgs(shape, 1, x, x_stride, b, c, bc_stride, dt, a, d, states, y);
  return CudaStatus(
      launch::SsdStepSlots(args, static_cast<int64_t>(slots.host.size()),
                           slots.device.data, stream.get()),
      kOp);
}

}  // namespace twice::kernels::cuda
