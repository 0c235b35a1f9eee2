// Validating wrappers of the row-wise and element-wise kernels (cuda_ops.h):
// RMSNorm, RoPE, the MLP activations, embedding, sampling, conversions and
// fills. The CPU entry points' checks first, then the raw launchers of
// launch.h.
#include <cstdint>
#include <vector>

#include "kernels/check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/span_bits.h"
#include "kernels/dtype.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {
namespace {

absl::Status CheckRmsNorm(int64_t rows, int64_t dim, float eps, int64_t x_size,
                          int64_t w_size, int64_t y_size) {
  constexpr char kOp[] = "RmsNorm";
  // rows is the grid's x size: at most 2^31 - 1 blocks.
  TWICE_RETURN_IF_ERROR(CheckArg(rows >= 0 && rows < (int64_t{1} << 31) &&
                                     dim >= 1 && dim <= (int64_t{1} << 30),
                                 kOp, "bad dimensions"));
  TWICE_RETURN_IF_ERROR(CheckArg(eps >= 0.0f, kOp, "eps must be >= 0"));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "x", x_size, rows * dim));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "weight", w_size, dim));
  return CheckSize(kOp, "y", y_size, rows * dim);
}

}  // namespace

absl::Status RmsNorm(const Stream& stream, DeviceSpan<const float> x,
                     int64_t rows, int64_t dim, DeviceSpan<const float> weight,
                     float eps, DeviceSpan<float> y) {
  TWICE_RETURN_IF_ERROR(
      CheckRmsNorm(rows, dim, eps, x.size, weight.size, y.size));
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(
      launch::RmsNorm(x.data, rows, static_cast<int>(dim), weight.data, eps,
                      y.data, /*y16=*/nullptr, stream.get()),
      "RmsNorm");
}

absl::Status RmsNorm(const Stream& stream, DeviceSpan<const float> x,
                     int64_t rows, int64_t dim, DeviceSpan<const float> weight,
                     float eps, DeviceSpan<float> y, DeviceSpan<Bf16> y16) {
  TWICE_RETURN_IF_ERROR(
      CheckRmsNorm(rows, dim, eps, x.size, weight.size, y.size));
  TWICE_RETURN_IF_ERROR(CheckSize("RmsNorm", "y16", y16.size, rows * dim));
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(
      launch::RmsNorm(x.data, rows, static_cast<int>(dim), weight.data, eps,
                      y.data, Bits(y16), stream.get()),
      "RmsNorm");
}

absl::Status RopeRotateHalf(const Stream& stream, DeviceSpan<float> x,
                            int64_t rows, int64_t row_stride, int64_t heads,
                            int64_t head_dim, int64_t start_pos, float base) {
  constexpr char kOp[] = "RopeRotateHalf";
  TWICE_RETURN_IF_ERROR(CheckArg(
      rows >= 0 && heads >= 1 && head_dim >= 2 && head_dim % 2 == 0 &&
          row_stride >= heads * head_dim && start_pos >= 0 && base > 0.0f,
      kOp, "bad dimensions"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "x", x.size, StridedExtent(rows, heads * head_dim, row_stride)));
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(
      launch::RopeRotateHalf(x.data, rows, row_stride, static_cast<int>(heads),
                             static_cast<int>(head_dim), start_pos, base,
                             stream.get()),
      kOp);
}

absl::Status SiluMul(const Stream& stream, DeviceSpan<const float> gate,
                     int64_t gate_stride, DeviceSpan<const float> mult,
                     int64_t mult_stride, int64_t rows, int64_t cols,
                     DeviceSpan<float> out) {
  constexpr char kOp[] = "SiluMul";
  TWICE_RETURN_IF_ERROR(CheckArg(
      rows >= 0 && cols >= 1 && gate_stride >= cols && mult_stride >= cols, kOp,
      "bad dimensions"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(kOp, "gate", gate.size,
                                     StridedExtent(rows, cols, gate_stride)));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(kOp, "mult", mult.size,
                                     StridedExtent(rows, cols, mult_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size, rows * cols));
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(
      launch::SiluMul(gate.data, gate_stride, mult.data, mult_stride, rows,
                      cols, out.data, stream.get()),
      kOp);
}

absl::Status SwiGlu(const Stream& stream, DeviceSpan<const float> u,
                    int64_t rows, int64_t hidden, DeviceSpan<float> out) {
  constexpr char kOp[] = "SwiGlu";
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows >= 0 && hidden >= 1, kOp, "bad dimensions"));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "u", u.size, rows * 2 * hidden));
  if (rows == 0) return CheckSize(kOp, "out", out.size, 0);
  // out = u[:, :h] · silu(u[:, h:]): the second half gates.
  return SiluMul(stream, u.subspan(hidden, u.size - hidden), 2 * hidden, u,
                 2 * hidden, rows, hidden, out);
}

absl::Status ReluSquared(const Stream& stream, DeviceSpan<float> x) {
  if (x.size == 0) return absl::OkStatus();
  return CudaStatus(launch::ReluSquared(x.data, x.size, stream.get()),
                    "ReluSquared");
}

absl::Status Gelu(const Stream& stream, DeviceSpan<const float> x,
                  DeviceSpan<float> out) {
  TWICE_RETURN_IF_ERROR(CheckSize("Gelu", "out", out.size, x.size));
  if (x.size == 0) return absl::OkStatus();
  return CudaStatus(launch::Gelu(x.data, x.size, out.data, stream.get()),
                    "Gelu");
}

absl::Status ActivationToBf16(const Stream& stream, MlpActivationKind kind,
                              DeviceSpan<const float> in, int64_t in_stride,
                              DeviceSpan<const float> mult, int64_t mult_stride,
                              int64_t rows, int64_t cols,
                              DeviceSpan<Bf16> out) {
  constexpr char kOp[] = "ActivationToBf16";
  // The kernel's kind numbers.
  static_assert(static_cast<int>(MlpActivationKind::kSiluMul) == 0 &&
                static_cast<int>(MlpActivationKind::kReluSquared) == 1 &&
                static_cast<int>(MlpActivationKind::kGelu) == 2);
  const bool gated = kind == MlpActivationKind::kSiluMul;
  TWICE_RETURN_IF_ERROR(CheckArg(rows >= 0 && cols >= 1 && in_stride >= cols &&
                                     (!gated || mult_stride >= cols),
                                 kOp, "bad dimensions"));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "in", in.size, StridedExtent(rows, cols, in_stride)));
  if (gated) {
    TWICE_RETURN_IF_ERROR(CheckAtLeast(kOp, "mult", mult.size,
                                       StridedExtent(rows, cols, mult_stride)));
  }
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size, rows * cols));
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(
      launch::ActivationToBf16(static_cast<int>(kind), in.data, in_stride,
                               gated ? mult.data : nullptr, mult_stride, rows,
                               cols, Bits(out), stream.get()),
      kOp);
}

absl::Status EmbeddingOfDeviceIds(const Stream& stream,
                                  DeviceSpan<const int32_t> ids,
                                  DeviceSpan<const Bf16> table, int64_t vocab,
                                  int64_t dim, float scale,
                                  DeviceSpan<float> out) {
  constexpr char kOp[] = "Embedding";
  TWICE_RETURN_IF_ERROR(
      CheckArg(vocab >= 1 && dim >= 1, kOp, "bad dimensions"));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "table", table.size, vocab * dim));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size, ids.size * dim));
  if (ids.size == 0) return absl::OkStatus();
  return CudaStatus(launch::Embedding(ids.data, ids.size, Bits(table), dim,
                                      scale, out.data, stream.get()),
                    kOp);
}

absl::Status Embedding(const Stream& stream, DeviceAllocator& allocator,
                       absl::Span<const int32_t> ids,
                       DeviceSpan<const Bf16> table, int64_t vocab, int64_t dim,
                       float scale, DeviceSpan<float> out) {
  constexpr char kOp[] = "Embedding";
  const int64_t rows = static_cast<int64_t>(ids.size());
  for (const int32_t id : ids) {
    TWICE_RETURN_IF_ERROR(CheckArg(id >= 0 && id < vocab, kOp,
                                   "token id outside the vocabulary"));
  }
  if (rows == 0) {
    return EmbeddingOfDeviceIds(stream, {}, table, vocab, dim, scale, out);
  }
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer ids_dev,
                         allocator.AllocateArray<int32_t>(rows));
  TWICE_RETURN_IF_ERROR(
      stream.Upload(ids.data(), ids_dev.data(), rows * sizeof(int32_t)));
  return EmbeddingOfDeviceIds(
      stream, {static_cast<const int32_t*>(ids_dev.data()), rows}, table, vocab,
      dim, scale, out);
}

int64_t DeviceSamplingRuleBytes() {
  return static_cast<int64_t>(sizeof(launch::SampleRule));
}

void PackSamplingRules(absl::Span<const SamplingRule> rules, void* out) {
  auto* device_rules = static_cast<launch::SampleRule*>(out);
  for (size_t i = 0; i < rules.size(); ++i) {
    const SamplingRule& rule = rules[i];
    device_rules[i] = {rule.temperature, rule.top_k, rule.top_p, rule.seed,
                       rule.draw};
  }
}

absl::Status SampleRowsOfDeviceRules(const Stream& stream,
                                     DeviceSpan<const float> logits,
                                     int64_t rows, int64_t row_stride,
                                     int64_t vocab, const void* device_rules,
                                     DeviceSpan<int32_t> out) {
  constexpr char kOp[] = "SampleRows";
  TWICE_RETURN_IF_ERROR(CheckArg(rows >= 0 && rows < (int64_t{1} << 31) &&
                                     vocab >= 1 && vocab < (int64_t{1} << 31) &&
                                     row_stride >= vocab,
                                 kOp, "bad dimensions"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(kOp, "logits", logits.size,
                                     StridedExtent(rows, vocab, row_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size, rows));
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(
      launch::SampleRows(logits.data, rows, row_stride, vocab,
                         static_cast<const launch::SampleRule*>(device_rules),
                         out.data, stream.get()),
      kOp);
}

absl::Status SampleRows(const Stream& stream, DeviceAllocator& allocator,
                        DeviceSpan<const float> logits, int64_t rows,
                        int64_t row_stride, int64_t vocab,
                        absl::Span<const SamplingRule> rules,
                        DeviceSpan<int32_t> out) {
  constexpr char kOp[] = "SampleRows";
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "rules", rules.size(), rows));
  for (const SamplingRule& rule : rules) {
    TWICE_RETURN_IF_ERROR(ValidateSamplingRule(rule));
  }
  if (rows <= 0) {
    return SampleRowsOfDeviceRules(stream, logits, rows, row_stride, vocab,
                                   nullptr, out);
  }
  std::vector<launch::SampleRule> device_rules(rules.size());
  PackSamplingRules(rules, device_rules.data());
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer rules_dev,
                         allocator.AllocateArray<launch::SampleRule>(rows));
  TWICE_RETURN_IF_ERROR(
      stream.Upload(device_rules.data(), rules_dev.data(),
                    rows * static_cast<int64_t>(sizeof(launch::SampleRule))));
  return SampleRowsOfDeviceRules(stream, logits, rows, row_stride, vocab,
                                 rules_dev.data(), out);
}

absl::Status ConvertToBf16(const Stream& stream, DeviceSpan<const float> x,
                           DeviceSpan<Bf16> out) {
  TWICE_RETURN_IF_ERROR(CheckSize("ConvertToBf16", "out", out.size, x.size));
  if (x.size == 0) return absl::OkStatus();
  return CudaStatus(launch::F32ToBf16(x.data, x.size, Bits(out), stream.get()),
                    "ConvertToBf16");
}

absl::Status ConvertToF32(const Stream& stream, DeviceSpan<const Bf16> x,
                          DeviceSpan<float> out) {
  TWICE_RETURN_IF_ERROR(CheckSize("ConvertToF32", "out", out.size, x.size));
  if (x.size == 0) return absl::OkStatus();
  return CudaStatus(launch::Bf16ToF32(Bits(x), x.size, out.data, stream.get()),
                    "ConvertToF32");
}

absl::Status ConvertF16ToBf16(const Stream& stream,
                              DeviceSpan<const uint16_t> x,
                              DeviceSpan<Bf16> out) {
  TWICE_RETURN_IF_ERROR(CheckSize("ConvertF16ToBf16", "out", out.size, x.size));
  if (x.size == 0) return absl::OkStatus();
  return CudaStatus(launch::F16ToBf16(x.data, x.size, Bits(out), stream.get()),
                    "ConvertF16ToBf16");
}

absl::Status DequantizeRowsToBf16(const Stream& stream,
                                  DeviceSpan<const int8_t> values,
                                  DeviceSpan<const float> scales, int64_t rows,
                                  int64_t cols, DeviceSpan<Bf16> out) {
  constexpr char kOp[] = "DequantizeRowsToBf16";
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows >= 0 && cols >= 0, kOp, "negative dimensions"));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "values", values.size, rows * cols));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "scales", scales.size, rows * I8BlocksPerRow(cols)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size, rows * cols));
  if (rows * cols == 0) return absl::OkStatus();
  return CudaStatus(launch::I8RowsToBf16(values.data, scales.data, rows, cols,
                                         Bits(out), stream.get()),
                    kOp);
}

absl::Status FillUniform(const Stream& stream, DeviceSpan<float> x,
                         uint64_t seed, float scale) {
  if (x.size == 0) return absl::OkStatus();
  return CudaStatus(
      launch::FillUniformF32(x.data, x.size, seed, scale, stream.get()),
      "FillUniform");
}

absl::Status FillUniform(const Stream& stream, DeviceSpan<Bf16> x,
                         uint64_t seed, float scale) {
  if (x.size == 0) return absl::OkStatus();
  return CudaStatus(
      launch::FillUniformBf16(Bits(x), x.size, seed, scale, stream.get()),
      "FillUniform");
}

}  // namespace twice::kernels::cuda
