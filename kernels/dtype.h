// Element types of tensors, and scalar conversions between them.
//
// F32 is the compute type of activations and states. BF16 and F16 are the
// floating types checkpoints are published in; weights keep them. I8 is a
// weight format made at load: symmetric, one f32 scale per block of kI8Block
// consecutive elements of a row (the last block of a row may be shorter;
// Tensor::scales()), kept in groups of 16 rows (i8_layout.h) rather than
// row by row. Products with an I8 matrix quantize their input per
// block too, to int16 (kernels/cpu/int8_dot.h). It is never read from a
// file, because a safetensors I8 tensor carries no scales.
#ifndef TWICE_KERNELS_DTYPE_H_
#define TWICE_KERNELS_DTYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace twice::kernels {

enum class DType { kF32, kBF16, kF16, kI8 };

// Elements per I8 scale block (see above). 64: one 512-bit load of a row
// per scale, and a block's largest weight sets the step of 64 weights
// instead of a whole row's (thousands), which is what keeps int8 answers
// close to f32's.
inline constexpr int64_t kI8Block = 64;
// Scale blocks of a row of `cols` elements.
inline constexpr int64_t I8BlocksPerRow(int64_t cols) {
  return (cols + kI8Block - 1) / kI8Block;
}

// Bytes per element (the scales of I8 not counted).
int DTypeSize(DType dtype);
// Safetensors spelling: "F32", "BF16", "F16"; "I8".
std::string_view DTypeName(DType dtype);
// The floating safetensors dtypes ("F32", "BF16", "F16"); nullopt for
// anything else, I8 included (see above).
std::optional<DType> ParseFloatDType(std::string_view name);
// Lower-case flag spelling: "f32", "bf16", "f16", "int8".
std::string_view DTypeFlagName(DType dtype);

// Scalar conversions. bf16 is the top half of an f32; f16 is IEEE binary16
// (subnormals, infinities and NaN preserved). The narrowing ones round to
// nearest even; f32 beyond f16's range becomes infinity.
float Bf16ToF32(uint16_t bits);
float F16ToF32(uint16_t bits);
uint16_t F32ToBf16(float value);
uint16_t F32ToF16(float value);

// Converts `count` little-endian elements of a floating `dtype` at `src`
// (any alignment) into `dst` (count floats). Not for I8 (no scales).
void ConvertToF32(DType dtype, const void* src, int64_t count, float* dst);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_DTYPE_H_
