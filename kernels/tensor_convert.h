// Converting weight tensors between dtypes, once, at load.
//
// Between the floating types (F32, BF16, F16) elements are converted one by
// one (narrowing rounds to nearest even). To I8, every row (dim 0; the
// other dimensions are the row's columns) gets the symmetric scale
// max|w| / 127 and q = round(w / scale) in [-127, 127] (an all-zero row has
// scale 0); from I8, values are multiplied back by their row's scale.
// The result is an immutable shared buffer (Tensor::Immutable /
// QuantizedRows); converting to the tensor's own dtype returns the tensor.
#ifndef TWICE_KERNELS_TENSOR_CONVERT_H_
#define TWICE_KERNELS_TENSOR_CONVERT_H_

#include "absl/status/statusor.h"
#include "kernels/tensor.h"

namespace twice::kernels {

// INVALID_ARGUMENT for I8 of a rank-0 tensor; UNIMPLEMENTED for a tensor
// not on the CPU.
[[nodiscard]] absl::StatusOr<Tensor> ConvertTensor(const Tensor& tensor,
                                                   DType to);

// Row `row` of a [rows, cols] tensor of any dtype as f32 into `out` (cols
// floats): the embedding lookup.
void RowToF32(const Tensor& tensor, int64_t row, float* out);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_TENSOR_CONVERT_H_
