#include "kernels/activations.h"

#include <cmath>
#include <functional>

#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/status_macros.h"

namespace twice::kernels {

absl::Status SiluMul(absl::Span<const float> gate, int64_t gate_stride,
                     absl::Span<const float> mult, int64_t mult_stride,
                     int64_t rows, int64_t cols, absl::Span<float> out) {
  constexpr char kOp[] = "SiluMul";
  TWICE_RETURN_IF_ERROR(CheckArg(
      rows >= 0 && cols >= 1 && gate_stride >= cols && mult_stride >= cols, kOp,
      "need rows >= 0, cols >= 1, strides >= cols"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(kOp, "gate", gate.size(),
                                     StridedExtent(rows, cols, gate_stride)));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(kOp, "mult", mult.size(),
                                     StridedExtent(rows, cols, mult_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size(), rows * cols));
  // In place only over a contiguous input (the rows are split among
  // threads: any other overlap would read what another row wrote).
  const auto clear_of = [&](const float* data, int64_t stride) {
    const bool overlap =
        std::less<const float*>{}(out.data(),
                                  data + StridedExtent(rows, cols, stride)) &&
        std::less<const float*>{}(data, out.data() + out.size());
    return !overlap || (out.data() == data && stride == cols);
  };
  TWICE_RETURN_IF_ERROR(CheckArg(
      clear_of(gate.data(), gate_stride) && clear_of(mult.data(), mult_stride),
      kOp, "out overlaps an input other than as its same contiguous rows"));
  if (rows == 0) return absl::OkStatus();
  return Dispatch(
      [&](KernelBackend& b) {
        return b.SiluMul(gate, gate_stride, mult, mult_stride, rows, cols, out);
      },
      [&] {
        cpu::SiluMul(gate.data(), gate_stride, mult.data(), mult_stride, rows,
                     cols, out.data());
        return absl::OkStatus();
      });
}

absl::Status SwiGlu(absl::Span<const float> u, int64_t rows, int64_t hidden,
                    absl::Span<float> out) {
  constexpr char kOp[] = "SwiGlu";
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows >= 0 && hidden >= 1, kOp, "need rows >= 0, hidden >= 1"));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "u", u.size(), rows * 2 * hidden));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size(), rows * hidden));
  if (rows == 0) return absl::OkStatus();
  return Dispatch(
      [&](KernelBackend& b) { return b.SwiGlu(u, rows, hidden, out); },
      [&] {
        cpu::SiluMul(u.data() + hidden, 2 * hidden, u.data(), 2 * hidden, rows,
                     hidden, out.data());
        return absl::OkStatus();
      });
}

void Gelu(absl::Span<float> x) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  for (float& v : x) v = 0.5f * v * (1.0f + std::erf(v * kInvSqrt2));
}

void ReluSquared(absl::Span<float> x) {
  for (float& v : x) v = v > 0.0f ? v * v : 0.0f;
}

}  // namespace twice::kernels
