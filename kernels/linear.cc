#include "kernels/linear.h"

#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/status_macros.h"

namespace twice::kernels {

absl::Status Linear(absl::Span<const float> x, int64_t m, int64_t k,
                    const Tensor& weight, int64_t n,
                    absl::Span<const float> bias, absl::Span<float> y) {
  constexpr char kOp[] = "Linear";
  TWICE_RETURN_IF_ERROR(CheckArg(m >= 0 && k >= 1 && n >= 1, kOp,
                                 "dimensions must be m >= 0, k >= 1, n >= 1"));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "x", x.size(), m * k));
  TWICE_RETURN_IF_ERROR(CheckShape(kOp, "weight", weight.shape(), {n, k}));
  if (!bias.empty())
    TWICE_RETURN_IF_ERROR(CheckSize(kOp, "bias", bias.size(), n));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y.size(), m * n));
  if (m == 0) return absl::OkStatus();
  return Dispatch(
      [&](KernelBackend& b) { return b.Linear(x, m, k, weight, n, bias, y); },
      [&]() -> absl::Status {
        if (weight.device() != Device::kCpu) {
          return UnsupportedTensor(kOp, "weight", weight);
        }
        const float* b = bias.empty() ? nullptr : bias.data();
        if (weight.dtype() == DType::kF32) {
          cpu::Linear(x.data(), m, k, weight.data(), n, b, y.data());
        } else {
          cpu::LinearLowp(x.data(), m, cpu::LowpRowsOf(weight), n, b, y.data());
        }
        return absl::OkStatus();
      });
}

absl::Status Linear(absl::Span<const float> x, int64_t m, int64_t k,
                    absl::Span<const float> weight, int64_t n,
                    absl::Span<const float> bias, absl::Span<float> y) {
  TWICE_RETURN_IF_ERROR(CheckSize("Linear", "weight", weight.size(), n * k));
  return Linear(x, m, k, Tensor::View(weight.data(), {n, k}), n, bias, y);
}

}  // namespace twice::kernels
