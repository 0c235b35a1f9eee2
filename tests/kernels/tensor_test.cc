// Tensor storage kinds and the load-time dtype conversions.
#include "kernels/tensor.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/i8_layout.h"
#include "kernels/tensor_convert.h"
#include "tests/kernels/kernel_test_util.h"

namespace twice::kernels {
namespace {

TEST(TensorTest, OwningCopiesCopyViewsAndSharedBuffersShare) {
  Tensor a = Tensor::FromVector({2}, {1.0f, 2.0f});
  Tensor b = a;
  b.mutable_data()[0] = 5.0f;
  EXPECT_EQ(a.data()[0], 1.0f);  // value semantics

  const Tensor bf = *ConvertTensor(a, DType::kBF16);
  const Tensor bf2 = bf;
  EXPECT_EQ(bf.raw_data(), bf2.raw_data());  // one immutable buffer
  EXPECT_EQ(bf.dtype(), DType::kBF16);
  EXPECT_EQ(bf.ByteSize(), 4);
  EXPECT_EQ(bf.device(), Device::kCpu);

  const Tensor q = *ConvertTensor(
      Tensor::FromVector({2, 3}, {1, 2, 3, 4, 5, 6}), DType::kI8);
  // Values and one scale per block (one block per row here), padded to a
  // whole group of 16 rows and a whole block of 64 columns (i8_layout.h).
  EXPECT_EQ(q.ByteSize(), 16 * 64 + 16 * 4);
}

TEST(TensorTest, F32AccessOnAnotherDtypeAborts) {
  const Tensor bf =
      *ConvertTensor(Tensor::FromVector({3}, {1, 2, 3}), DType::kBF16);
  EXPECT_DEATH((void)bf.data(), "data\\(\\) on a BF16 tensor of shape \\[3\\]");
}

TEST(TensorConvertTest, NarrowingRoundsToNearestEven) {
  // bf16 keeps 8 mantissa bits: 1 + 2^-8 is halfway between 1 and
  // 1 + 2^-7 and rounds to the even 1; 1 + 3 * 2^-8 rounds up to 1 + 2^-6.
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8))),
            1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(std::nanf("")))));
  // f16: 1 + 2^-11 ties to 1; beyond 65504 (+ half an ulp) is infinity;
  // 2^-24 is the smallest subnormal.
  EXPECT_EQ(F16ToF32(F32ToF16(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  EXPECT_EQ(F16ToF32(F32ToF16(70000.0f)),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(F16ToF32(F32ToF16(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(std::nanf("")))));
}

// Over random magnitudes across f16's whole range (subnormals and overflow
// included): the result is a nearest f16 (no neighbour is closer) and a tie
// goes to the even one.
TEST(TensorConvertTest, F16RoundingIsNearestEvenEverywhere) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> exponent(-27.0f, 16.5f);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  for (int i = 0; i < 200000; ++i) {
    float v = std::ldexp(mantissa(rng), static_cast<int>(exponent(rng)));
    if (i % 2 == 1) v = -v;
    const uint16_t h = F32ToF16(v);
    const double got = F16ToF32(h);
    if (std::isinf(got)) {
      ASSERT_GE(std::fabs(v), 65520.0f) << v;
      continue;
    }
    const double err = std::fabs(got - v);
    for (int step : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(h + step);
      if ((n & 0x7c00u) == 0x7c00u || ((h & 0x7fffu) == 0 && step < 0)) {
        continue;  // no such neighbour
      }
      const double other = std::fabs(F16ToF32(n) - double{v});
      ASSERT_LE(err, other) << v;
      if (err == other) {
        ASSERT_EQ(h & 1u, 0u) << "tie not to even at " << v;
      }
    }
  }
}

// Blocks of kI8Block elements of each row, the last one short (cols is
// not a multiple of the block): each has the scale of its own largest
// magnitude.
TEST(TensorConvertTest, Int8IsSymmetricPerBlockWithinHalfAStep) {
  const int64_t rows = 5, cols = 2 * kI8Block + 37;
  const int64_t blocks = I8BlocksPerRow(cols);
  ASSERT_EQ(blocks, 3);
  std::vector<float> w = testing::RandomVector(rows * cols, 7, 3.0f);
  for (int64_t c = 0; c < cols; ++c) w[2 * cols + c] = 0.0f;  // a zero row
  w[4 * cols + 5] = 40.0f;  // an outlier: only its own block's step grows
  const Tensor q =
      *ConvertTensor(Tensor::FromVector({rows, cols}, w), DType::kI8);
  ASSERT_EQ(q.dtype(), DType::kI8);
  const auto* v = static_cast<const int8_t*>(q.raw_data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      SCOPED_TRACE(::testing::Message() << "row " << r << " block " << b);
      const int64_t begin = b * kI8Block;
      const int64_t end = std::min(cols, begin + kI8Block);
      const float scale = q.scales()[I8ScaleIndex(cols, r, b)];
      float max_abs = 0.0f;
      for (int64_t c = begin; c < end; ++c) {
        max_abs = std::max(max_abs, std::fabs(w[r * cols + c]));
      }
      EXPECT_FLOAT_EQ(scale, max_abs / 127.0f);
      for (int64_t c = begin; c < end; ++c) {
        const int64_t i = r * cols + c;
        const int8_t value = v[I8ValueIndex(cols, r, c)];
        EXPECT_GE(value, -127);
        EXPECT_LE(std::fabs(value * scale - w[i]),
                  0.5f * scale * (1.0f + 1e-5f))
            << "element " << i;
      }
    }
  }
  EXPECT_LT(q.scales()[I8ScaleIndex(cols, 4, 1)], 4.0f / 127.0f);
  // Dequantizing is the inverse up to the rounding above.
  const Tensor back = *ConvertTensor(q, DType::kF32);
  std::vector<float> row(cols);
  RowToF32(q, 3, row.data());
  for (int64_t c = 0; c < cols; ++c) {
    EXPECT_EQ(row[c], back.data()[3 * cols + c]);
  }
}

TEST(TensorConvertTest, RowLookupMatchesWholeConversionForEveryDtype) {
  const std::vector<float> w = testing::RandomVector(4 * 19, 3);
  const Tensor f32 = Tensor::FromVector({4, 19}, w);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kI8}) {
    const Tensor t = *ConvertTensor(f32, dtype);
    const Tensor wide = *ConvertTensor(t, DType::kF32);
    std::vector<float> row(19);
    RowToF32(t, 2, row.data());
    for (int c = 0; c < 19; ++c) {
      EXPECT_EQ(row[c], wide.data()[2 * 19 + c]) << DTypeName(dtype);
    }
  }
}

}  // namespace
}  // namespace twice::kernels
