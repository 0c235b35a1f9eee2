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
#include "kernels/taylor_feature_map.h"

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
  TWICE_RETURN_IF_ERROR(CheckArg(
      shape.state <= 128 && shape.heads <= 65535 && shape.head_dim <= 65535,
      kOp, "need N <= 128 and H, P <= 65535"));
  if (slots.host.empty()) return absl::OkStatus();
  const launch::SsdArgs args =
      MakeSsdArgs(shape, 1, x, x_stride, b, c, bc_stride, dt, a, d, states, y);
  return CudaStatus(
      launch::SsdStepSlots(args, static_cast<int64_t>(slots.host.size()),
                           slots.device.data, stream.get()),
      kOp);
}

absl::Status LinearAttentionStepSlots(
    const Stream& stream, DeviceSpan<const float> q, DeviceSpan<const float> k,
    DeviceSpan<const float> v, const LinearAttentionStepDims& dims, float eps,
    DeviceSpan<float> kv_states, DeviceSpan<float> k_states,
    const DeviceSlotRows& slots, DeviceSpan<float> y) {
  constexpr char kOp[] = "LinearAttentionStepSlots";
  TWICE_RETURN_IF_ERROR(CheckLinearAttentionStepSlots(
      dims, q.size, k.size, v.size, kv_states.size, k_states.size, slots.host,
      y.size));
  TWICE_RETURN_IF_ERROR(CheckDeviceRows(kOp, slots));
  TWICE_RETURN_IF_ERROR(CheckArg(
      dims.feature_dim <= 64 &&
          TaylorFeatureDim(dims.feature_dim) <= launch::kMaxFeatureWidth &&
          dims.heads <= 65535 && dims.head_dim <= 65535,
      kOp, "need D = 1 + F + F^2 <= 2048 and heads, head_dim <= 65535"));
  if (slots.host.empty()) return absl::OkStatus();
  return CudaStatus(
      launch::LinearAttentionStepSlots(
          q.data, k.data, v.data, static_cast<int64_t>(slots.host.size()),
          static_cast<int>(dims.heads), static_cast<int>(dims.head_dim),
          static_cast<int>(dims.feature_dim), eps, kv_states.data,
          k_states.data, slots.device.data, y.data, stream.get()),
      kOp);
}

absl::Status WindowAttentionStepSlots(
    const Stream& stream, DeviceSpan<const float> qkv, int64_t qkv_stride,
    const WindowStepDims& dims, float rotary_base, float scale,
    DeviceSpan<const int64_t> positions_device,
    absl::Span<const int64_t> positions_host, DeviceSpan<float> ring_k,
    DeviceSpan<float> ring_v, const DeviceSlotRows& slots,
    DeviceSpan<float> y) {
  constexpr char kOp[] = "WindowAttentionStepSlots";
  TWICE_RETURN_IF_ERROR(CheckWindowAttentionStepSlots(
      dims, qkv.size, qkv_stride, rotary_base, positions_host, ring_k.size,
      ring_v.size, slots.host, y.size));
  TWICE_RETURN_IF_ERROR(CheckDeviceRows(kOp, slots));
  if (positions_device.size != static_cast<int64_t>(positions_host.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": the device positions have ", positions_device.size,
                     " rows, the host copy ", positions_host.size()));
  }
  TWICE_RETURN_IF_ERROR(CheckArg(dims.head_dim <= 128 && dims.heads <= 65535,
                                 kOp,
                                 "need head_dim <= 128 and heads <= 65535"));
  if (slots.host.empty()) return absl::OkStatus();
  launch::WindowStepArgs args;
  args.qkv = qkv.data;
  args.qkv_stride = qkv_stride;
  args.positions = positions_device.data;
  args.slots = slots.device.data;
  args.rows = static_cast<int64_t>(slots.host.size());
  args.heads = static_cast<int>(dims.heads);
  args.head_dim = static_cast<int>(dims.head_dim);
  args.window = dims.window;
  args.rotary_base = rotary_base;
  args.scale = scale;
  args.ring_k = ring_k.data;
  args.ring_v = ring_v.data;
  args.y = y.data;
  return CudaStatus(launch::WindowAttentionStepSlots(args, stream.get()), kOp);
}

}  // namespace twice::kernels::cuda
