#include "kernels/tensor.h"

#include <cstdio>
#include <cstdlib>
#include <new>
#include <utility>

#include "absl/strings/str_join.h"
#include "kernels/i8_layout.h"

namespace twice::kernels {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string out = "[";
  out += absl::StrJoin(shape, ", ");
  out += "]";
  return out;
}

std::string_view DeviceName(Device device) {
  return device == Device::kCuda ? "cuda" : "cpu";
}

Tensor Tensor::Zeros(Shape shape) {
  Tensor t;
  t.owned_.assign(NumElements(shape), 0.0f);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::FromVector(Shape shape, std::vector<float> values) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.owned_ = std::move(values);
  return t;
}

Tensor Tensor::View(const float* data, Shape shape) {
  return ViewOf(DType::kF32, data, std::move(shape));
}

Tensor Tensor::ViewOf(DType dtype, const void* data, Shape shape,
                      Device device) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.view_ = data;
  return t;
}

Tensor Tensor::Immutable(DType dtype, Shape shape,
                         std::shared_ptr<const void> bytes) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.shared_ = std::move(bytes);
  return t;
}

Tensor Tensor::QuantizedRows(Shape shape, std::vector<int8_t> values,
                             std::vector<float> block_scales) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = DType::kI8;
  const int64_t rows = t.shape_.empty() ? 1 : t.shape_[0];
  const int64_t cols = rows == 0 ? 0 : NumElements(t.shape_) / rows;
  if (static_cast<int64_t>(values.size()) != I8ValueCount(rows, cols) ||
      static_cast<int64_t>(block_scales.size()) != I8ScaleCount(rows, cols)) {
    std::fprintf(stderr,
                 "Tensor::QuantizedRows: %zu values and %zu scales for shape "
                 "%s (want %lld and %lld)\n",
                 values.size(), block_scales.size(),
                 ShapeToString(t.shape_).c_str(),
                 static_cast<long long>(I8ValueCount(rows, cols)),
                 static_cast<long long>(I8ScaleCount(rows, cols)));
    std::abort();
  }
  t.i8_value_bytes_ = static_cast<int64_t>(values.size());
  auto buffer = std::make_shared<const std::vector<int8_t>>(std::move(values));
  t.shared_ = std::shared_ptr<const void>(buffer, buffer->data());
  t.scales_ =
      std::make_shared<const std::vector<float>>(std::move(block_scales));
  return t;
}

int64_t Tensor::ByteSize() const {
  int64_t bytes =
      dtype_ == DType::kI8 ? i8_value_bytes_ : size() * DTypeSize(dtype_);
  if (scales_ != nullptr) {
    bytes += static_cast<int64_t>(scales_->size() * sizeof(float));
  }
  return bytes;
}

void Tensor::DieNotF32(const char* accessor) const {
  std::fprintf(stderr, "Tensor::%s() on a %s tensor of shape %s\n", accessor,
               std::string(DTypeName(dtype_)).c_str(),
               ShapeToString(shape_).c_str());
  std::abort();
}

std::shared_ptr<void> AllocateAligned(int64_t bytes) {
  constexpr size_t kAlign = 64;
  const size_t size =
      (static_cast<size_t>(bytes) + kAlign - 1) / kAlign * kAlign;
  void* p =
      ::operator new (size == 0 ? kAlign : size, std::align_val_t{kAlign});
  return std::shared_ptr<void>(
      p, [](void* q) { ::operator delete (q, std::align_val_t{kAlign}); });
}

}  // namespace twice::kernels
