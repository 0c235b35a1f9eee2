// Gated activations.
//
// SiluMul: out[i, j] = silu(gate[i, j]) · mult[i, j], silu(g) = g / (1 + e^-g).
//   gate and mult are row-major [rows, cols] views with their own row strides
//   (so both may be column ranges of one wider matrix); out is contiguous
//   [rows, cols] and may be gate or mult itself when that one is contiguous
//   (stride cols): each element is read before it is written, on every
//   backend. Any other overlap of out with an input is INVALID_ARGUMENT.
// SwiGlu: the Based / GPT "GatedMlp" activation over a fused fc1 output
//   u [rows, 2h]: out[i, j] = u[i, j] · silu(u[i, h + j]), out [rows, h].
//   The SECOND half is the gate.
// ReluSquared: x = relu(x)^2 in place (Nemotron-H's MLP activation).
// Gelu: x = x/2 (1 + erf(x / sqrt 2)) in place, the exact (erf) form of
//   torch's nn.GELU() (RAT's MLP).
#ifndef TWICE_KERNELS_ACTIVATIONS_H_
#define TWICE_KERNELS_ACTIVATIONS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace twice::kernels {

// Which of the activations above sits between an MLP's two products (a
// device that fuses the activation into its GEMM's input takes this).
enum class MlpActivationKind { kSiluMul, kReluSquared, kGelu };

[[nodiscard]] absl::Status SiluMul(absl::Span<const float> gate,
                                   int64_t gate_stride,
                                   absl::Span<const float> mult,
                                   int64_t mult_stride, int64_t rows,
                                   int64_t cols, absl::Span<float> out);

[[nodiscard]] absl::Status SwiGlu(absl::Span<const float> u, int64_t rows,
                                  int64_t hidden, absl::Span<float> out);

// Elementwise and cheap next to the GEMMs around it: no backend dispatch.
void ReluSquared(absl::Span<float> x);
void Gelu(absl::Span<float> x);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_ACTIVATIONS_H_
