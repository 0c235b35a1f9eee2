// Products with int8 weight rows (kernels/dtype.h: one f32 scale per block
// of kI8Block elements of a row) by an input quantized per block to int16:
// each block of x gets its own symmetric scale, so a block's dot product is
// an exact integer sum and the row's result is
//   y[r] = sum over blocks b of  sx[b] * sw[r, b] * (qx[b, :] · qw[r, b, :]).
// int16 keeps x to 2^-15 of its block's largest value (finer than a bf16
// rounding, 2^-9 of each element), so the answers move with the weights'
// rounding only; int8 inputs would let vpdpbusd take 64 weights per
// instruction, but moved about 1.5 % of the shipped models' greedy answers
// on top of the weights' share (models/README.md). Multiplying integers is
// still what removes the int8 GEMV's cost of converting every weight to
// f32 before an FMA.
//
// W is in the row-group layout of kernels/i8_layout.h: the products run
// 16 rows at a time, one row per 32-bit lane, so a group's results come
// out as one vector with no sums across lanes.
//
// Builds, chosen from the CPU:
//   - AVX-512 VNNI: weights sign-extended to int16 as they are loaded
//     (vpmovsxbw), vpdpwssd accumulating pairs into 32-bit sums;
//   - AVX2: vpmaddwd at 8 lanes (also on the few AVX-512 CPUs without
//     VNNI);
//   - portable C++.
// All compute the same integer block sums (|sum| < 2^31: 64 products of at
// most 32767 · 127) and add the blocks of a row in the same order, so
// they differ only in the rounding of those f32 sums (fused or not).
#ifndef TWICE_KERNELS_CPU_INT8_DOT_H_
#define TWICE_KERNELS_CPU_INT8_DOT_H_

#include <cstdint>
#include <vector>

namespace twice::kernels::cpu {

// Ordered: each build runs on every CPU that runs a later one.
enum class Int8Build { kPortable, kAvx2, kAvx512Vnni };
// The fastest build this CPU runs (cached after the first call).
Int8Build CpuInt8Build();
// Every build this CPU runs, slowest first (for tests).
std::vector<Int8Build> Int8BuildsOfThisCpu();
const char* Int8BuildName(Int8Build build);

// x quantized per block: `values` padded with zeros to a whole number of
// blocks, one scale per block.
struct QuantizedInput {
  std::vector<int16_t> values;
  std::vector<float> scales;
};
// Quantizes x[0, k) into `out` (reusing its memory): per block, scale =
// largest magnitude / 32767 and values rounded to nearest even after
// multiplying by the scale's f32 inverse. A block whose largest magnitude
// is 0 has scale 0; a non-finite element makes its block's scale NaN, so
// the outputs that use it are NaN, as in an f32 product.
void QuantizeInput(const float* x, int64_t k, QuantizedInput& out);

// Int8 weights [n, k] with their per-block scales, in the layout of
// i8_layout.h (Tensor::raw_data() and Tensor::scales() of an I8 tensor).
struct Int8Rows {
  const int8_t* values = nullptr;
  const float* scales = nullptr;
  int64_t k = 0;
};

// y[r] = W[r, :] · x (+ bias[r]) for rows [r0, r1), x as QuantizeInput
// made it. Any range works; whole groups of 16 rows (r0 a multiple of 16)
// are what the SIMD builds compute, so tasks should split there.
void Int8GemvRows(Int8Build build, const Int8Rows& w, const QuantizedInput& x,
                  const float* bias, int64_t r0, int64_t r1, float* y);
// y[i, r] = W[r, :] · x[i] (+ bias[r]) for m inputs (y row-major with row
// stride ldy) and rows [r0, r1): W is read from memory once for all of
// them. Each result is bit for bit Int8GemvRows' for that input in the
// same build (exact integer block sums, blocks added in the same order),
// so a batch of sequences steps exactly as each would alone.
void Int8GemmRows(Int8Build build, const Int8Rows& w, const QuantizedInput* x,
                  int64_t m, const float* bias, int64_t r0, int64_t r1,
                  float* y, int64_t ldy);
// Rows [r0, r1) of W as f32 (values times their block scales), row-major
// into `out` ((r1 - r0) * k floats): an embedding row of a tied table, a
// conversion.
void Int8RowsToF32(Int8Build build, const Int8Rows& w, int64_t r0, int64_t r1,
                   float* out);

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_INT8_DOT_H_
