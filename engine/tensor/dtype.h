// Storage dtypes of weights and their conversion to the f32 compute type.
#ifndef TWICE_ENGINE_TENSOR_DTYPE_H_
#define TWICE_ENGINE_TENSOR_DTYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/types/span.h"

namespace twice::engine {

enum class DType { kF32, kBF16, kF16 };

// Bytes per element.
int DTypeSize(DType dtype);
// Safetensors spelling: "F32", "BF16", "F16".
std::string_view DTypeName(DType dtype);
// Inverse of DTypeName; nullopt for anything else.
std::optional<DType> ParseDType(std::string_view name);

// Scalar conversions. bf16 is the top half of an f32; f16 is IEEE binary16
// (subnormals, infinities and NaN preserved).
float Bf16ToF32(uint16_t bits);
float F16ToF32(uint16_t bits);

// Converts `count` little-endian elements of `dtype` at `src` (any
// alignment) into `dst` (count floats).
void ConvertToF32(DType dtype, const void* src, int64_t count, float* dst);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_TENSOR_DTYPE_H_
