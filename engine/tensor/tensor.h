// The engine's tensors are the kernels' Tensor (kernels/tensor.h: shape,
// dtype, device, owning / view / shared storage), named in this namespace
// so engine code reads `Tensor` and `DType` like its own types.
#ifndef TWICE_ENGINE_TENSOR_TENSOR_H_
#define TWICE_ENGINE_TENSOR_TENSOR_H_

#include "kernels/dtype.h"
#include "kernels/tensor.h"

namespace twice::engine {

using kernels::Bf16ToF32;
using kernels::ConvertToF32;
using kernels::Device;
using kernels::DType;
using kernels::DTypeFlagName;
using kernels::DTypeName;
using kernels::DTypeSize;
using kernels::F16ToF32;
using kernels::F32ToBf16;
using kernels::F32ToF16;
using kernels::NumElements;
using kernels::ParseFloatDType;
using kernels::Shape;
using kernels::ShapeToString;
using kernels::Tensor;

}  // namespace twice::engine

#endif  // TWICE_ENGINE_TENSOR_TENSOR_H_
