#include "kernels/causal_conv1d.h"

#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/status_macros.h"

namespace twice::kernels {

absl::Status CausalConv1d(absl::Span<const float> x, int64_t tokens,
                          int64_t channels, int64_t x_stride,
                          absl::Span<const float> weight, int64_t kernel_size,
                          absl::Span<float> tail, absl::Span<float> out) {
  constexpr char kOp[] = "CausalConv1d";
  TWICE_RETURN_IF_ERROR(CheckArg(
      tokens >= 0 && channels >= 1 && kernel_size >= 1 && x_stride >= channels,
      kOp,
      "need tokens >= 0, channels >= 1, "
      "kernel_size >= 1, x_stride >= channels"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "x", x.size(), StridedExtent(tokens, channels, x_stride)));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "weight", weight.size(), channels * kernel_size));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "tail", tail.size(), (kernel_size - 1) * channels));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size(), tokens * channels));
  if (tokens == 0) return absl::OkStatus();
  return Dispatch(
      [&](KernelBackend& b) {
        return b.CausalConv1d(x, tokens, channels, x_stride, weight,
                              kernel_size, tail, out);
      },
      [&] {
        cpu::CausalConv1d(x.data(), tokens, channels, x_stride, weight.data(),
                          kernel_size, tail.data(), out.data());
        return absl::OkStatus();
      });
}

}  // namespace twice::kernels
