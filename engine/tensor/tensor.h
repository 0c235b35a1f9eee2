// Tensor: a row-major f32 array with a shape; either owning its buffer or a
// read-only view over bytes someone else keeps alive (typically a memory
// mapped safetensors file, which the model holds for its lifetime).
//
// Compute in the engine is f32; stored bf16 / f16 weights are converted on
// load (dtype.h). Copying an owning tensor copies its data; copying a view
// copies the pointer. Not thread-safe for concurrent mutation; concurrent
// reads are fine.
#ifndef TWICE_ENGINE_TENSOR_TENSOR_H_
#define TWICE_ENGINE_TENSOR_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace twice::engine {

using Shape = std::vector<int64_t>;

// Number of elements of `shape` (1 for rank 0).
int64_t NumElements(const Shape& shape);
// "[2, 3]".
std::string ShapeToString(const Shape& shape);

class Tensor {
 public:
  // An empty rank-1 owning tensor of zero elements.
  Tensor() : shape_{0} {}

  // Owning, zero-filled.
  static Tensor Zeros(Shape shape);
  // Owning; `values.size()` must equal NumElements(shape).
  static Tensor FromVector(Shape shape, std::vector<float> values);
  // Non-owning read-only view of NumElements(shape) floats at `data`.
  static Tensor View(const float* data, Shape shape);

  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t size() const { return NumElements(shape_); }
  bool is_view() const { return view_ != nullptr; }

  const float* data() const { return view_ != nullptr ? view_ : owned_.data(); }
  absl::Span<const float> span() const {
    return absl::MakeConstSpan(data(), size());
  }
  // Mutable access; only for owning tensors (a view is read-only).
  float* mutable_data() { return owned_.data(); }
  absl::Span<float> mutable_span() { return absl::MakeSpan(owned_); }

 private:
  Shape shape_;
  std::vector<float> owned_;
  const float* view_ = nullptr;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_TENSOR_TENSOR_H_
