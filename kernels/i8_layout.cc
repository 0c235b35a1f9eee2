#include "kernels/i8_layout.h"

#include <cstring>

namespace twice::kernels {

I8Arrays PackI8Rows(const int8_t* values, const float* scales, int64_t rows,
                    int64_t cols) {
  const int64_t blocks = I8BlocksPerRow(cols);
  I8Arrays packed;
  packed.values.assign(static_cast<size_t>(I8ValueCount(rows, cols)), 0);
  packed.scales.assign(static_cast<size_t>(I8ScaleCount(rows, cols)), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* row = values + r * cols;
    // Whole quads are one 4-byte copy; a row's last, partial quad goes
    // element by element.
    int64_t c = 0;
    for (; c + kI8Quad <= cols; c += kI8Quad) {
      std::memcpy(&packed.values[I8ValueIndex(cols, r, c)], row + c, kI8Quad);
    }
    for (; c < cols; ++c) packed.values[I8ValueIndex(cols, r, c)] = row[c];
    for (int64_t b = 0; b < blocks; ++b) {
      packed.scales[I8ScaleIndex(cols, r, b)] = scales[r * blocks + b];
    }
  }
  return packed;
}

I8Arrays UnpackI8Rows(const int8_t* values, const float* scales, int64_t rows,
                      int64_t cols) {
  const int64_t blocks = I8BlocksPerRow(cols);
  I8Arrays out;
  out.values.resize(static_cast<size_t>(rows * cols));
  out.scales.resize(static_cast<size_t>(rows * blocks));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      out.values[r * cols + c] = values[I8ValueIndex(cols, r, c)];
    }
    for (int64_t b = 0; b < blocks; ++b) {
      out.scales[r * blocks + b] = scales[I8ScaleIndex(cols, r, b)];
    }
  }
  return out;
}

}  // namespace twice::kernels
