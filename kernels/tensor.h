// Tensor: a row-major array with a shape, an element type (dtype.h) and a
// device — the one data type kernels/ entry points take for weights and
// the engine holds them in.
//
// Storage is one of three kinds, and copies follow it:
//   - owning f32 (Zeros, FromVector): mutable; a copy copies the data, as a
//     value type (activations, small weights converted at load);
//   - a view of memory someone else keeps alive (View, ViewOf: typically a
//     memory-mapped safetensors file the model holds for its lifetime);
//     read-only, any alignment; a copy copies the pointer;
//   - an immutable shared buffer (Immutable, QuantizedRows: weights
//     converted or quantized at load); a copy shares it, so a tied
//     lm_head and embedding are one buffer.
// I8 tensors are weights quantized in blocks of each row (dtype.h): with
// rows = dim(0) and the remaining dimensions flattened into columns,
// element (r, c) stands for values[I8ValueIndex(cols, r, c)] *
// scales()[I8ScaleIndex(cols, r, c / kI8Block)], in the row-group layout
// of i8_layout.h (not row-major).
//
// The f32 accessors (data, span, mutable_*) are for F32 tensors only; a
// call on another dtype is a programming error and aborts naming the
// dtype, because a silent reinterpretation would compute garbage. Code that
// handles every dtype uses raw_data() with dtype().
//
// Device: every tensor is on the CPU today; Device::kCuda names device
// memory for the device-resident executor.
//
// Not thread-safe for concurrent mutation; concurrent reads are fine.
#ifndef TWICE_KERNELS_TENSOR_H_
#define TWICE_KERNELS_TENSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "kernels/dtype.h"

namespace twice::kernels {

using Shape = std::vector<int64_t>;

// Number of elements of `shape` (1 for rank 0).
int64_t NumElements(const Shape& shape);
// "[2, 3]".
std::string ShapeToString(const Shape& shape);

enum class Device { kCpu, kCuda };
// "cpu", "cuda".
std::string_view DeviceName(Device device);

class Tensor {
 public:
  // An empty rank-1 owning f32 tensor of zero elements.
  Tensor() : shape_{0} {}

  // Owning f32, zero-filled.
  static Tensor Zeros(Shape shape);
  // Owning f32; `values.size()` must equal NumElements(shape).
  static Tensor FromVector(Shape shape, std::vector<float> values);
  // Non-owning read-only f32 view of NumElements(shape) floats at `data`.
  static Tensor View(const float* data, Shape shape);
  // Non-owning read-only view of NumElements(shape) little-endian `dtype`
  // elements at `data` (any alignment) in the memory of `device`. Not for
  // I8 (it has scales).
  static Tensor ViewOf(DType dtype, const void* data, Shape shape,
                       Device device = Device::kCpu);
  // Immutable buffer of NumElements(shape) `dtype` elements, shared by
  // copies. Not for I8.
  static Tensor Immutable(DType dtype, Shape shape,
                          std::shared_ptr<const void> bytes);
  // I8 weights [rows, cols] (rows = shape[0]) in the layout of
  // i8_layout.h: I8ValueCount(rows, cols) values and I8ScaleCount(rows,
  // cols) scales; sizes must match.
  static Tensor QuantizedRows(Shape shape, std::vector<int8_t> values,
                              std::vector<float> block_scales);

  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t size() const { return NumElements(shape_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool is_view() const { return view_ != nullptr; }
  // Bytes of the elements (and of the scales of I8, with their layout's
  // padding).
  int64_t ByteSize() const;

  // The elements in their dtype.
  const void* raw_data() const {
    if (view_ != nullptr) return view_;
    if (shared_ != nullptr) return shared_.get();
    return owned_.data();
  }
  // The immutable shared buffer of Immutable / QuantizedRows tensors (null
  // for owning and view tensors). While it is alive its bytes never change,
  // so a device copy of it stays valid for as long as a weak_ptr to it has
  // not expired.
  const std::shared_ptr<const void>& shared_storage() const { return shared_; }
  // I8 only: one f32 scale per block of a row, in the layout of
  // i8_layout.h; nullptr otherwise.
  const float* scales() const {
    return scales_ != nullptr ? scales_->data() : nullptr;
  }

  // F32 only (see above).
  const float* data() const {
    if (dtype_ != DType::kF32) DieNotF32("data");
    return static_cast<const float*>(raw_data());
  }
  absl::Span<const float> span() const {
    return absl::MakeConstSpan(data(), size());
  }
  // Mutable access; owning F32 tensors only (views and shared buffers are
  // read-only).
  float* mutable_data() {
    if (dtype_ != DType::kF32) DieNotF32("mutable_data");
    return owned_.data();
  }
  absl::Span<float> mutable_span() {
    if (dtype_ != DType::kF32) DieNotF32("mutable_span");
    return absl::MakeSpan(owned_);
  }

 private:
  [[noreturn]] void DieNotF32(const char* accessor) const;

  Shape shape_;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
  std::vector<float> owned_;
  std::shared_ptr<const void> shared_;
  const void* view_ = nullptr;
  std::shared_ptr<const std::vector<float>> scales_;
  // I8: bytes of the values with their layout's padding.
  int64_t i8_value_bytes_ = 0;
};

// Allocates `bytes` (rounded up to 64) aligned to 64 bytes, uninitialised,
// for Tensor::Immutable.
std::shared_ptr<void> AllocateAligned(int64_t bytes);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_TENSOR_H_
