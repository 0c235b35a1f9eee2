#include "kernels/dtype.h"

#include <bit>
#include <cstring>

namespace twice::kernels {

static_assert(std::endian::native == std::endian::little,
              "safetensors and state blobs are little-endian");

int DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kI8:
      return 1;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kI8:
      return "I8";
  }
  return "?";
}

std::string_view DTypeFlagName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kI8:
      return "int8";
  }
  return "?";
}

std::optional<DType> ParseFloatDType(std::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  return std::nullopt;
}

float Bf16ToF32(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

float F16ToF32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t out;
  if (exponent == 0x1f) {  // inf / NaN
    out = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal
    out = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // signed zero
    out = sign;
  } else {  // subnormal: normalise the mantissa
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    mantissa &= 0x3ffu;
    out = sign | (exponent << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(out);
}

uint16_t F32ToBf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it a (quiet) NaN
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  // Round to nearest even: add 0x7fff plus the lowest kept bit.
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

uint16_t F32ToF16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN: keep it a quiet NaN
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  // 65520 (half an ulp above 65504, the largest f16) and up round to
  // infinity; infinity stays infinity.
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  // Rounds q + rem / 2^shift to nearest, ties to even.
  auto round = [](uint32_t q, uint32_t rem, uint32_t half) {
    return rem > half || (rem == half && (q & 1u) != 0) ? q + 1 : q;
  };
  if (abs < 0x38800000u) {  // below 2^-14: an f16 subnormal (or zero)
    if (abs <= 0x33000000u) return sign;  // <= 2^-25 rounds to 0
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // to units of 2^-24
    const uint32_t q = round(mantissa >> shift, mantissa & ((1u << shift) - 1u),
                             1u << (shift - 1));
    return static_cast<uint16_t>(sign | q);  // 0x400 is the smallest normal
  }
  // Normal: rebias the exponent (127 -> 15) and keep 10 mantissa bits; a
  // carry out of the mantissa correctly bumps the exponent.
  const uint32_t q = round((abs - 0x38000000u) >> 13, abs & 0x1fffu, 0x1000u);
  return static_cast<uint16_t>(sign | q);
}

void ConvertToF32(DType dtype, const void* src, int64_t count, float* dst) {
  const auto* bytes = static_cast<const unsigned char*>(src);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(count) * 4);
      return;
    case DType::kBF16:
    case DType::kF16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t bits;
        std::memcpy(&bits, bytes + 2 * i, 2);
        dst[i] = dtype == DType::kBF16 ? Bf16ToF32(bits) : F16ToF32(bits);
      }
      return;
    case DType::kI8:
      return;  // needs scales: Tensor conversion, never called here
  }
}

}  // namespace twice::kernels
