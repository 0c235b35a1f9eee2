#include "kernels/tensor_convert.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/cpu/lowp_dot.h"
#include "kernels/i8_layout.h"

namespace twice::kernels {
namespace {

// Element i of a floating tensor as f32.
float ElementF32(const Tensor& t, int64_t i) {
  const auto* bytes = static_cast<const unsigned char*>(t.raw_data());
  if (t.dtype() == DType::kF32) {
    float v;
    std::memcpy(&v, bytes + 4 * i, 4);
    return v;
  }
  uint16_t bits;
  std::memcpy(&bits, bytes + 2 * i, 2);
  return t.dtype() == DType::kBF16 ? Bf16ToF32(bits) : F16ToF32(bits);
}

int64_t Cols(const Tensor& t) {
  return t.rank() == 0 ? 1 : t.size() / std::max<int64_t>(t.dim(0), 1);
}

// Elements [begin, end) of `t` as f32 into `out` (I8 dequantized).
void ElementsToF32(const Tensor& t, int64_t begin, int64_t end, float* out) {
  if (t.dtype() == DType::kI8) {
    const auto* q = static_cast<const int8_t*>(t.raw_data());
    const int64_t cols = Cols(t);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t r = i / cols;
      const int64_t c = i - r * cols;
      const float scale = t.scales()[I8ScaleIndex(cols, r, c / kI8Block)];
      out[i - begin] = static_cast<float>(q[I8ValueIndex(cols, r, c)]) * scale;
    }
  } else {
    for (int64_t i = begin; i < end; ++i) out[i - begin] = ElementF32(t, i);
  }
}

// Row by row, so no f32 copy of a large weight is ever made; each block
// of a row gets the scale of its largest magnitude (dtype.h). Written
// straight into the layout of i8_layout.h (zero padding included), so no
// row-major copy is made either.
Tensor QuantizeRows(const Tensor& t) {
  const int64_t rows = t.dim(0);
  const int64_t cols = Cols(t);
  const int64_t blocks = I8BlocksPerRow(cols);
  std::vector<int8_t> q(static_cast<size_t>(I8ValueCount(rows, cols)), 0);
  std::vector<float> scales(static_cast<size_t>(I8ScaleCount(rows, cols)),
                            0.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    ElementsToF32(t, r * cols, (r + 1) * cols, row.data());
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t begin = b * kI8Block;
      const int64_t end = std::min(cols, begin + kI8Block);
      float max_abs = 0.0f;
      for (int64_t c = begin; c < end; ++c) {
        max_abs = std::max(max_abs, std::fabs(row[c]));
      }
      const float scale = max_abs / 127.0f;
      scales[I8ScaleIndex(cols, r, b)] = scale;
      const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
      for (int64_t c = begin; c < end; ++c) {
        const float v = std::nearbyint(row[c] * inv);
        q[I8ValueIndex(cols, r, c)] =
            static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
      }
    }
  }
  return Tensor::QuantizedRows(t.shape(), std::move(q), std::move(scales));
}

}  // namespace

absl::StatusOr<Tensor> ConvertTensor(const Tensor& tensor, DType to) {
  if (tensor.device() != Device::kCpu) {
    return UnsupportedTensor("ConvertTensor", "tensor", tensor);
  }
  if (tensor.dtype() == to) return tensor;
  if (to == DType::kI8 && tensor.rank() == 0) {
    return absl::InvalidArgumentError(
        "ConvertTensor: int8 needs rows (a tensor of rank >= 1)");
  }
  if (to == DType::kI8) return QuantizeRows(tensor);
  const int64_t n = tensor.size();
  std::shared_ptr<void> buffer = AllocateAligned(n * DTypeSize(to));
  // In blocks, through a small f32 buffer.
  constexpr int64_t kBlock = 16384;
  std::vector<float> block(static_cast<size_t>(std::min(n, kBlock)));
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    ElementsToF32(tensor, b, e, block.data());
    if (to == DType::kF32) {
      std::memcpy(static_cast<float*>(buffer.get()) + b, block.data(),
                  static_cast<size_t>(e - b) * sizeof(float));
      continue;
    }
    auto* out = static_cast<uint16_t*>(buffer.get()) + b;
    for (int64_t i = 0; i < e - b; ++i) {
      out[i] = to == DType::kBF16 ? F32ToBf16(block[i]) : F32ToF16(block[i]);
    }
  }
  return Tensor::Immutable(to, tensor.shape(), std::move(buffer));
}

void RowToF32(const Tensor& tensor, int64_t row, float* out) {
  const int64_t cols = Cols(tensor);
  if (tensor.dtype() == DType::kF32) {
    std::memcpy(out, tensor.data() + row * cols,
                static_cast<size_t>(cols) * sizeof(float));
    return;
  }
  cpu::LowpRowsToF32(cpu::CpuIsa(), cpu::LowpRowsOf(tensor), row, row + 1, out);
}

}  // namespace twice::kernels
