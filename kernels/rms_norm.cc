#include "kernels/rms_norm.h"

#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/status_macros.h"

namespace twice::kernels {

absl::Status RmsNorm(absl::Span<const float> x, int64_t rows, int64_t dim,
                     absl::Span<const float> weight, float eps,
                     absl::Span<float> y) {
  constexpr char kOp[] = "RmsNorm";
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows >= 0 && dim >= 1, kOp, "need rows >= 0 and dim >= 1"));
  TWICE_RETURN_IF_ERROR(CheckArg(eps >= 0.0f, kOp, "eps must be >= 0"));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "x", x.size(), rows * dim));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "weight", weight.size(), dim));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y.size(), rows * dim));
  if (rows == 0) return absl::OkStatus();
  return Dispatch(
      [&](KernelBackend& b) { return b.RmsNorm(x, rows, dim, weight, eps, y); },
      [&] {
        cpu::RmsNorm(x.data(), rows, dim, weight.data(), eps, y.data());
        return absl::OkStatus();
      });
}

}  // namespace twice::kernels
