// The row-group layout of I8 weights (kernels/i8_layout.h): every element
// and scale has its own place inside the arrays, padding is zero, and
// packing and unpacking are inverses.
#include "kernels/i8_layout.h"

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace twice::kernels {
namespace {

TEST(I8LayoutTest, EveryElementAndScaleHasItsOwnPlace) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1},
                            {16, 64},
                            {17, 65},
                            {5, 130},
                            {33, 4},
                            {40, 768}}) {
    SCOPED_TRACE(::testing::Message() << rows << "x" << cols);
    std::set<int64_t> values, scales;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = I8ValueIndex(cols, r, c);
        ASSERT_GE(i, 0);
        ASSERT_LT(i, I8ValueCount(rows, cols));
        EXPECT_TRUE(values.insert(i).second) << r << "," << c;
      }
      for (int64_t b = 0; b < I8BlocksPerRow(cols); ++b) {
        const int64_t i = I8ScaleIndex(cols, r, b);
        ASSERT_GE(i, 0);
        ASSERT_LT(i, I8ScaleCount(rows, cols));
        EXPECT_TRUE(scales.insert(i).second) << r << "," << b;
      }
    }
  }
  // Four consecutive columns of a row are adjacent; the same quad of the
  // next row follows them.
  EXPECT_EQ(I8ValueIndex(768, 3, 9), I8ValueIndex(768, 3, 8) + 1);
  EXPECT_EQ(I8ValueIndex(768, 4, 8), I8ValueIndex(768, 3, 8) + kI8Quad);
}

TEST(I8LayoutTest, PackThenUnpackGivesTheRowsBackAndPadsWithZeros) {
  std::mt19937 rng(7);
  const int64_t rows = 21, cols = 150;  // a partial group and a partial block
  const int64_t blocks = I8BlocksPerRow(cols);
  std::vector<int8_t> values(rows * cols);
  for (int8_t& v : values) v = static_cast<int8_t>(int(rng() % 255) - 127);
  std::vector<float> scales(rows * blocks);
  for (float& s : scales) s = 0.01f + static_cast<float>(rng() % 100) * 1e-3f;

  const I8Arrays packed = PackI8Rows(values.data(), scales.data(), rows, cols);
  ASSERT_EQ(static_cast<int64_t>(packed.values.size()),
            I8ValueCount(rows, cols));
  ASSERT_EQ(static_cast<int64_t>(packed.scales.size()),
            I8ScaleCount(rows, cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(packed.values[I8ValueIndex(cols, r, c)], values[r * cols + c]);
    }
  }
  // Places no element maps to (padding rows and columns) are zero.
  std::vector<bool> used(packed.values.size(), false);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) used[I8ValueIndex(cols, r, c)] = true;
  }
  for (size_t i = 0; i < used.size(); ++i) {
    if (!used[i]) {
      ASSERT_EQ(packed.values[i], 0) << "padding at " << i;
    }
  }

  const I8Arrays back =
      UnpackI8Rows(packed.values.data(), packed.scales.data(), rows, cols);
  EXPECT_EQ(back.values, values);
  EXPECT_EQ(back.scales, scales);
}

}  // namespace
}  // namespace twice::kernels
