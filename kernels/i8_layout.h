// Where each element of an I8 weight lives in memory.
//
// An I8 matrix [rows, cols] (dtype.h: one f32 scale per block of kI8Block
// elements of a row) is stored in groups of kI8RowGroup rows, not row by
// row, so that the decode product (kernels/cpu/int8_dot.h) reads one
// contiguous stream and finishes 16 rows in one vector without horizontal
// sums. Row-major rows of 768 int8 weights streamed at about half the rate
// of this layout on the same weights (bench/README.md): each row is too
// short for the prefetchers to follow four of them at once.
//
//   values: [group][block][quad][row in group][4]  int8
//           a block of a group is 16 quads of 4 columns x 16 rows = 1 KiB,
//           one 64-byte line per quad (4 consecutive columns of 16 rows);
//   scales: [group][block][row in group]           f32
//           the 16 rows' scales of a block are one 64-byte vector.
// Rows past `rows` (the last group) and columns past `cols` (the last
// block) are zeros with scale 0, so every kernel reads whole groups and
// whole blocks.
#ifndef TWICE_KERNELS_I8_LAYOUT_H_
#define TWICE_KERNELS_I8_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "kernels/dtype.h"

namespace twice::kernels {

inline constexpr int64_t kI8RowGroup = 16;
// Consecutive columns of a row kept together (one 32-bit lane).
inline constexpr int64_t kI8Quad = 4;
// Bytes of one block of one group.
inline constexpr int64_t kI8GroupBlockBytes = kI8Block * kI8RowGroup;

inline constexpr int64_t I8RowGroups(int64_t rows) {
  return (rows + kI8RowGroup - 1) / kI8RowGroup;
}
// Sizes of the two arrays of an I8 matrix [rows, cols].
inline constexpr int64_t I8ValueCount(int64_t rows, int64_t cols) {
  return I8RowGroups(rows) * I8BlocksPerRow(cols) * kI8GroupBlockBytes;
}
inline constexpr int64_t I8ScaleCount(int64_t rows, int64_t cols) {
  return I8RowGroups(rows) * I8BlocksPerRow(cols) * kI8RowGroup;
}
// Index of element (r, c) in values.
inline constexpr int64_t I8ValueIndex(int64_t cols, int64_t r, int64_t c) {
  const int64_t group_block =
      (r / kI8RowGroup) * I8BlocksPerRow(cols) + c / kI8Block;
  const int64_t quad = (c % kI8Block) / kI8Quad;
  return group_block * kI8GroupBlockBytes +
         (quad * kI8RowGroup + r % kI8RowGroup) * kI8Quad + c % kI8Quad;
}
// Index of the scale of row r's block b in scales.
inline constexpr int64_t I8ScaleIndex(int64_t cols, int64_t r, int64_t b) {
  return ((r / kI8RowGroup) * I8BlocksPerRow(cols) + b) * kI8RowGroup +
         r % kI8RowGroup;
}

// An I8 matrix in this layout from row-major values [rows, cols] and
// scales [rows, I8BlocksPerRow(cols)] (how a quantizer produces them).
struct I8Arrays {
  std::vector<int8_t> values;
  std::vector<float> scales;
};
I8Arrays PackI8Rows(const int8_t* values, const float* scales, int64_t rows,
                    int64_t cols);
// The reverse: row-major values and scales, for consumers that take rows
// (a device upload).
I8Arrays UnpackI8Rows(const int8_t* values, const float* scales, int64_t rows,
                      int64_t cols);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_I8_LAYOUT_H_
