#include "engine/tensor/tensor.h"

#include <utility>

#include "absl/strings/str_join.h"

namespace twice::engine {

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
  Tensor t;
  t.shape_ = std::move(shape);
  t.view_ = data;
  return t;
}

}  // namespace twice::engine
