// Validating wrappers of the mixture-of-experts row moves (cuda_ops.h):
// the CPU twins' checks (kernels/top_k_routing.h) on the host copy of the
// routes, then the device copies' sizes against it.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/launch.h"
#include "kernels/status_macros.h"
#include "kernels/top_k_routing.h"

namespace twice::kernels::cuda {
namespace {

absl::Status CheckDeviceRoutes(const char* op, const DeviceRoutesView& routes) {
  if (routes.host == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": no routes"));
  }
  const int64_t n = static_cast<int64_t>(routes.host->source_row.size());
  if (routes.source_row.size != n || routes.entry.size != n ||
      routes.gate.size != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(op,
                     ": the device routes differ in size from the host "
                     "copy's ",
                     n, " entries"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GatherRows(const Stream& stream, DeviceSpan<const float> src,
                        int64_t cols, const DeviceRoutesView& routes,
                        DeviceSpan<float> dst) {
  constexpr char kOp[] = "GatherRows";
  TWICE_RETURN_IF_ERROR(CheckDeviceRoutes(kOp, routes));
  TWICE_RETURN_IF_ERROR(CheckRoutes(*routes.host));
  TWICE_RETURN_IF_ERROR(
      CheckGatherRows(src.size, cols, routes.host->source_row, dst.size));
  if (dst.size == 0) return absl::OkStatus();
  return CudaStatus(
      launch::GatherRows(src.data, cols, routes.source_row.data,
                         routes.source_row.size, dst.data, stream.get()),
      kOp);
}

absl::Status CombineRoutedRows(const Stream& stream,
                               DeviceSpan<const float> base,
                               DeviceSpan<const float> routed, int64_t cols,
                               const DeviceRoutesView& routes, float scale,
                               DeviceSpan<float> x) {
  constexpr char kOp[] = "CombineRoutedRows";
  TWICE_RETURN_IF_ERROR(CheckDeviceRoutes(kOp, routes));
  TWICE_RETURN_IF_ERROR(CheckCombineRoutedRows(base.size, routed.size, cols,
                                               *routes.host, x.size));
  if (x.size == 0) return absl::OkStatus();
  return CudaStatus(
      launch::CombineRoutedRows(base.data, routed.data, cols, routes.entry.data,
                                routes.gate.data, routes.host->rows,
                                static_cast<int>(routes.host->top_k), scale,
                                x.data, stream.get()),
      kOp);
}

}  // namespace twice::kernels::cuda
