// Validating wrappers of the kernels that run every sequence of a prefill
// pass in one launch (cuda_ops.h CausalConv1dSegments, SsdScanSegments,
// LinearAttentionSegments, WindowAttentionSegments),
// with the checks of the per-sequence forms they replace.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/featurized_args.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/ssd_args.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {
namespace {

// The device copy is read as launch::PassSegment: four int64 in order.
static_assert(sizeof(launch::PassSegment) == 4 * sizeof(int64_t) &&
              std::is_standard_layout_v<launch::PassSegment>);

constexpr int64_t kMaxSegments = 65535;  // one grid dimension

// The segments' checks against a pool of `slot_floats` floats per slot;
// the segments' most rows.
absl::StatusOr<int64_t> CheckSegments(const char* op,
                                      const DevicePassSegments& segments,
                                      int64_t rows, int64_t pool_floats,
                                      int64_t slot_floats) {
  const int64_t count = static_cast<int64_t>(segments.host.size());
  TWICE_RETURN_IF_ERROR(
      CheckArg(count <= kMaxSegments, op, "more than 65535 segments"));
  if (segments.device.size != 4 * count) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": the device copy holds ", segments.device.size,
                     " values for ", count, " segments (4 each)"));
  }
  TWICE_RETURN_IF_ERROR(CheckArg(slot_floats >= 1, op, "empty slot state"));
  TWICE_RETURN_IF_ERROR(CheckArg(pool_floats % slot_floats == 0, op,
                                 "the pool is no whole number of slots"));
  TWICE_RETURN_IF_ERROR(
      CheckPassSegments(op, segments.host, rows, pool_floats / slot_floats));
  int64_t most = 0;
  for (const PassSegment& s : segments.host) most = std::max(most, s.rows);
  return most;
}

const launch::PassSegment* Segments(const DevicePassSegments& segments) {
  return reinterpret_cast<const launch::PassSegment*>(segments.device.data);
}

}  // namespace

absl::Status CausalConv1dSegments(const Stream& stream,
                                  DeviceSpan<const float> x, int64_t rows,
                                  int64_t channels, int64_t x_stride,
                                  DeviceSpan<const float> weight,
                                  int64_t kernel_size, DeviceSpan<float> tails,
                                  const DevicePassSegments& segments,
                                  DeviceSpan<float> out) {
  constexpr char kOp[] = "CausalConv1dSegments";
  TWICE_RETURN_IF_ERROR(CheckArg(rows >= 0 && channels >= 1 &&
                                     kernel_size >= 2 && kernel_size <= 64 &&
                                     x_stride >= channels,
                                 kOp, "bad dimensions (2 <= kernel <= 64)"));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "x", x.size, StridedExtent(rows, channels, x_stride)));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "weight", weight.size, channels * kernel_size));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size, rows * channels));
  TWICE_ASSIGN_OR_RETURN(const int64_t most,
                         CheckSegments(kOp, segments, rows, tails.size,
                                       (kernel_size - 1) * channels));
  if (segments.host.empty()) return absl::OkStatus();
  return CudaStatus(
      launch::CausalConv1dSegments(
          x.data, channels, x_stride, weight.data,
          static_cast<int>(kernel_size), tails.data, Segments(segments),
          static_cast<int>(segments.host.size()), most, out.data, stream.get()),
      kOp);
}

absl::Status SsdScanSegments(
    const Stream& stream, const SsdShape& shape, int64_t rows,
    DeviceSpan<const float> x, int64_t x_stride, DeviceSpan<const float> b,
    DeviceSpan<const float> c, int64_t bc_stride, DeviceSpan<const float> dt,
    DeviceSpan<const float> a, DeviceSpan<const float> d,
    DeviceSpan<float> states, const DevicePassSegments& segments,
    DeviceSpan<float> y) {
  constexpr char kOp[] = "SsdScanSegments";
  const SsdShape& s = shape;
  TWICE_RETURN_IF_ERROR(CheckSsdRows(kOp, s, rows, x.size, x_stride, b.size,
                                     c.size, bc_stride, dt.size, a.size, d.size,
                                     y.size));
  const int64_t hp = s.heads * s.head_dim;
  TWICE_RETURN_IF_ERROR(
      CheckSegments(kOp, segments, rows, states.size, hp * s.state).status());
  if (segments.host.empty()) return absl::OkStatus();
  const launch::SsdArgs args =
      MakeSsdArgs(s, rows, x, x_stride, b, c, bc_stride, dt, a, d, states, y);
  return CudaStatus(launch::SsdScanSegments(
                        args, Segments(segments),
                        static_cast<int>(segments.host.size()), stream.get()),
                    kOp);
}

bool LinearAttentionSegmentsFit(int64_t head_dim, int64_t feature_size) {
  return head_dim >= 1 && head_dim <= launch::kMaxSegmentHeadDim &&
         feature_size >= 1 && feature_size <= launch::kMaxSegmentFeatureWidth;
}

absl::Status LinearAttentionSegments(
    const Stream& stream, DeviceSpan<const float> phi_q,
    DeviceSpan<const float> phi_k, DeviceSpan<const float> v, int64_t rows,
    const LinearAttentionDims& d, float eps, DeviceSpan<float> kv_states,
    DeviceSpan<float> k_states, const DevicePassSegments& segments,
    DeviceSpan<float> y) {
  constexpr char kOp[] = "LinearAttentionSegments";
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows >= 0 && d.heads >= 1 && d.heads <= 65535 &&
                   LinearAttentionSegmentsFit(d.head_dim, d.feature_size),
               kOp, "bad dimensions (head_dim <= 64, feature_size <= 288)"));
  const int64_t qk_row = d.heads * d.feature_size;
  const int64_t v_row = d.heads * d.head_dim;
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "phi_q", phi_q.size, rows * qk_row));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "phi_k", phi_k.size, rows * qk_row));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "v", v.size, rows * v_row));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y.size, rows * v_row));
  TWICE_RETURN_IF_ERROR(
      CheckSegments(kOp, segments, rows, kv_states.size, v_row * d.feature_size)
          .status());
  if (k_states.size * d.head_dim != kv_states.size) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": k_states holds ", k_states.size, " floats; the ",
                     kv_states.size / (v_row * d.feature_size),
                     " slots of kv_states need ", kv_states.size / d.head_dim));
  }
  if (segments.host.empty()) return absl::OkStatus();
  const launch::FeaturizedLinearAttentionArgs args = MakeFeaturizedArgs(
      phi_q, phi_k, v, rows, {}, {}, 0, d, eps, kv_states, k_states, y);
  return CudaStatus(launch::LinearAttentionSegments(
                        args, Segments(segments),
                        static_cast<int>(segments.host.size()), stream.get()),
                    kOp);
}

absl::Status WindowAttentionSegments(
    const Stream& stream, DeviceSpan<float> qkv, int64_t rows,
    int64_t qkv_stride, const WindowStepDims& dims, float rotary_base,
    float scale, DeviceSpan<float> ring_k, DeviceSpan<float> ring_v,
    const DevicePassSegments& segments, DeviceSpan<float> y) {
  constexpr char kOp[] = "WindowAttentionSegments";
  const int64_t width = dims.heads * dims.head_dim;
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows >= 0 && dims.heads >= 1 && dims.head_dim >= 2 &&
                   dims.head_dim <= 128 && dims.head_dim % 2 == 0 &&
                   dims.window >= 1 && qkv_stride >= 3 * width,
               kOp, "bad dimensions (head_dim even and <= 128, window >= 1)"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "qkv", qkv.size, StridedExtent(rows, 3 * width, qkv_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y.size, rows * width));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "ring_v", ring_v.size, ring_k.size));
  TWICE_ASSIGN_OR_RETURN(
      const int64_t most,
      CheckSegments(kOp, segments, rows, ring_k.size, dims.window * width));
  if (segments.host.empty()) return absl::OkStatus();
  launch::WindowSegmentsArgs args;
  args.qkv = qkv.data;
  args.qkv_stride = qkv_stride;
  args.heads = static_cast<int>(dims.heads);
  args.head_dim = static_cast<int>(dims.head_dim);
  args.window = dims.window;
  args.rotary_base = rotary_base;
  args.scale = scale;
  args.ring_k = ring_k.data;
  args.ring_v = ring_v.data;
  args.y = y.data;
  return CudaStatus(
      launch::WindowAttentionSegments(args, Segments(segments),
                                      static_cast<int>(segments.host.size()),
                                      most, stream.get()),
      kOp);
}

}  // namespace twice::kernels::cuda
