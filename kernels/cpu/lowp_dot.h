// Row-times-vector dot products over low-precision weight rows (bf16, f16,
// int8) with f32 accumulation, in builds chosen once at run time from the
// CPU's features (CpuIsa()):
//   - AVX-512 BF16: bf16 rows by vdpbf16ps (bf16_dot.h), 32 weights per
//     instruction with no widening (f16 as AVX-512F);
//   - AVX-512F (+BW): 16 lanes; bf16 widened by a 16-bit shift, f16 by
//     vcvtph2ps;
//   - AVX2 + FMA + F16C: the same at 8 lanes;
//   - portable C++.
// int8 rows go to int8_dot.h (integer products with an input quantized per
// block), in its own builds.
//
// The input of a bf16 matrix is rounded to bf16 first, in every build and
// for any number of rows (LinearLowp does the same before its panels):
// a bf16 product takes bf16 on both sides and accumulates in f32, as a
// GPU's bf16 GEMM and llama.cpp's bf16 dot do. The product of two bf16
// values is exact in f32, so the builds differ only in the order of the
// f32 sums, and a step (one row) and a prefill (many) of the same tokens
// agree to f32 accumulation error (the design's invariants); what the
// rounding costs is one bf16 rounding of each input element (relative
// 2^-9), measured against f32 in models/README.md. That rounding is what
// lets vdpbf16ps stream a bf16 row at about twice the rate of widening it
// (bench/README.md). f16 rows keep f32 inputs (no instruction here
// multiplies f16).
#ifndef TWICE_KERNELS_CPU_LOWP_DOT_H_
#define TWICE_KERNELS_CPU_LOWP_DOT_H_

#include <cstdint>
#include <string_view>

#include "kernels/dtype.h"
#include "kernels/tensor.h"

namespace twice::kernels::cpu {

// Ordered: each build runs on every CPU that runs a later one.
enum class Isa { kPortable, kAvx2, kAvx512, kAvx512Bf16 };
// The widest build this CPU runs (cached after the first call).
Isa CpuIsa();
// "avx512_bf16", "avx512", "avx2", "portable".
std::string_view IsaName(Isa isa);

// Weights of dtype BF16 or F16, row-major [n, k], or I8 in the layout of
// kernels/i8_layout.h with its block scales (Tensor::scales()); scales are
// nullptr for the floating types.
struct LowpRows {
  DType dtype = DType::kBF16;
  const void* data = nullptr;
  const float* scales = nullptr;
  int64_t k = 0;
};
// The rows of a BF16, F16 or I8 tensor [rows, ...] (k: the product of the
// other dimensions).
LowpRows LowpRowsOf(const Tensor& t);

// y[r] = W[r, :] · x (+ bias[r]) for rows [r0, r1), with the kernels of
// `isa` (callers pass CpuIsa(); tests pass each one the CPU has).
void LowpGemvRows(Isa isa, const LowpRows& w, const float* x, const float* bias,
                  int64_t r0, int64_t r1, float* y);
// y[i, r] = W[r, :] · x[i, :] (+ bias[r]) for the m rows of x (row-major
// [m, k]) and rows [r0, r1), y row-major with row stride ldy. A bf16 W in
// the AVX-512 BF16 build is read once for all of them (each load of W
// serves two rows of x), and every result is bit for bit LowpGemvRows'
// for that row of x, so a batch of sequences steps exactly as each would
// alone; other dtypes and builds run LowpGemvRows row by row.
void LowpGemmRows(Isa isa, const LowpRows& w, const float* x, int64_t m,
                  const float* bias, int64_t r0, int64_t r1, float* y,
                  int64_t ldy);
// out[i] = x[i] rounded to the nearest bf16 (ties to even), as f32: the
// input of every product with a bf16 matrix. `out` may be `x`.
void RoundToBf16(const float* x, int64_t n, float* out);
// Rows [r0, r1) of W widened to f32 into `out` ((r1 - r0) * k floats; I8
// multiplied by its block scales).
void LowpRowsToF32(Isa isa, const LowpRows& w, int64_t r0, int64_t r1,
                   float* out);

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_LOWP_DOT_H_
