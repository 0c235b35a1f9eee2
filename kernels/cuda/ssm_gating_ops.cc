// Validating wrappers of the CUDA gating kernels (cuda_ops.h): the checks
// of the CPU entry points (kernels/ssm_gating.h), so both refuse the same
// calls with the same messages.
#include <limits>

#include "kernels/check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/launch.h"
#include "kernels/ssm_gating.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {

absl::Status BiasSiluRows(const Stream& stream, DeviceSpan<float> x,
                          int64_t rows, DeviceSpan<const float> bias) {
  TWICE_RETURN_IF_ERROR(CheckBiasSiluRows(x.size, rows, bias.size));
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(
      launch::BiasSiluRows(x.data, rows, bias.size, bias.data, stream.get()),
      "BiasSiluRows");
}

absl::Status SoftplusBiasRows(const Stream& stream, DeviceSpan<const float> raw,
                              int64_t rows, int64_t stride,
                              DeviceSpan<const float> bias,
                              DeviceSpan<float> out) {
  TWICE_RETURN_IF_ERROR(
      CheckSoftplusBiasRows(raw.size, rows, stride, bias.size, out.size));
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(launch::SoftplusBiasRows(raw.data, rows, stride, bias.size,
                                             bias.data, out.data, stream.get()),
                    "SoftplusBiasRows");
}

absl::Status GatedGroupRmsNorm(const Stream& stream, DeviceSpan<const float> z,
                               int64_t z_stride, DeviceSpan<const float> y,
                               int64_t rows, int64_t width, int64_t groups,
                               DeviceSpan<const float> weight, double eps,
                               DeviceSpan<float> out) {
  constexpr char kOp[] = "GatedGroupRmsNorm";
  TWICE_RETURN_IF_ERROR(CheckGatedGroupRmsNorm(z.size, z_stride, y.size, rows,
                                               width, groups, weight.size, eps,
                                               out.size));
  // One block per (row, group).
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows * groups <= std::numeric_limits<int32_t>::max(), kOp,
               "rows * groups must fit one grid (< 2^31 blocks)"));
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(
      launch::GatedGroupRmsNorm(z.data, z_stride, y.data, rows, width, groups,
                                weight.data, eps, out.data, stream.get()),
      kOp);
}

}  // namespace twice::kernels::cuda
