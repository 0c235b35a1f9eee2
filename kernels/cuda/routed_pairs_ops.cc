// Validating wrappers of the mixture of experts routed per pair
// (cuda_ops.h): sizes and ranges on the host, before any launch. The
// pairs' experts live only on the device; the kernels skip one out of
// range instead of writing out of bounds.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/launch.h"
#include "kernels/status_macros.h"
#include "kernels/top_k_routing.h"

namespace twice::kernels::cuda {

static_assert(launch::kNoExpertPair == kNoExpert,
              "the CUDA kernels mark a pair with no expert as the CPU does");

absl::Status RouteTopKPairs(const Stream& stream,
                            DeviceSpan<const float> logits, int64_t rows,
                            int64_t experts, int64_t top_k,
                            const DevicePaddingRows& padding,
                            DeviceSpan<float> pair_experts,
                            DeviceSpan<float> pair_gates) {
  constexpr char kOp[] = "RouteTopKPairs";
  TWICE_RETURN_IF_ERROR(CheckArg(
      rows >= 0 && experts >= 1 && experts < kMaxPairExperts && top_k >= 1 &&
          top_k <= experts && top_k <= launch::kMaxDeviceTopK,
      kOp, "need rows >= 0, 1 <= k <= min(experts, 32) and experts < 2^24"));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "logits", logits.size, rows * experts));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "pair_experts", pair_experts.size, rows * top_k));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "pair_gates", pair_gates.size, rows * top_k));
  TWICE_RETURN_IF_ERROR(
      CheckArg(padding.row_slots.size == 0 || padding.row_slots.size == rows,
               kOp, "padding rows are known by one slot per row"));
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(
      launch::RouteTopKPairs(
          logits.data, rows, static_cast<int>(experts), static_cast<int>(top_k),
          padding.row_slots.size == 0 ? nullptr : padding.row_slots.data,
          padding.first_slot, pair_experts.data, pair_gates.data, stream.get()),
      kOp);
}

absl::Status RoutedLinear(const Stream& stream, DeviceSpan<const float> x,
                          int64_t x_group, const RoutedWeights& weights,
                          DeviceSpan<const float> pair_experts, int64_t pairs,
                          DeviceSpan<int32_t> workspace, DeviceSpan<float> y) {
  constexpr char kOp[] = "RoutedLinear";
  TWICE_RETURN_IF_ERROR(CheckArg(
      weights.experts >= 1 && weights.experts < kMaxPairExperts &&
          weights.rows >= 1 && weights.cols >= 1,
      kOp, "need 1 <= experts < 2^24 and matrices of at least one element"));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "matrices", weights.matrices.size, weights.experts));
  TWICE_RETURN_IF_ERROR(
      CheckArg(pairs >= 0 && x_group >= 1 && pairs % x_group == 0 &&
                   pairs < (int64_t{1} << 31),
               kOp, "need 0 <= pairs < 2^31, a whole number of x_group pairs"));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "x", x.size, pairs / x_group * weights.cols));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "pair_experts", pair_experts.size, pairs));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "workspace", workspace.size,
                   RoutedLinearWorkspace(weights.experts, pairs)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y.size, pairs * weights.rows));
  if (pairs == 0) return absl::OkStatus();
  return CudaStatus(
      launch::RoutedLinear(x.data, x_group,
                           reinterpret_cast<const launch::bf16_bits* const*>(
                               weights.matrices.data),
                           static_cast<int>(weights.experts), weights.rows,
                           weights.cols, pair_experts.data, pairs,
                           workspace.data, y.data, stream.get()),
      kOp);
}

absl::Status CombineRoutedPairs(const Stream& stream,
                                DeviceSpan<const float> base,
                                DeviceSpan<const float> routed, int64_t cols,
                                int64_t rows, int64_t top_k,
                                DeviceSpan<const float> gates, float scale,
                                DeviceSpan<float> x) {
  constexpr char kOp[] = "CombineRoutedPairs";
  TWICE_RETURN_IF_ERROR(CheckCombineRoutedPairs(
      base.size, routed.size, cols, rows, top_k, gates.size, x.size));
  TWICE_RETURN_IF_ERROR(
      CheckArg(top_k <= launch::kMaxDeviceTopK, kOp, "need k <= 32"));
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(
      launch::CombineRoutedPairs(base.data, routed.data, cols, rows,
                                 static_cast<int>(top_k), gates.data, scale,
                                 x.data, stream.get()),
      kOp);
}

}  // namespace twice::kernels::cuda
