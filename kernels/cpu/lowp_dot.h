// Row-times-vector dot products over low-precision weight rows (bf16, f16,
// int8) with f32 activations and f32 accumulation, in three builds chosen
// once at run time from the CPU's features (CpuIsa()):
//   - AVX-512F (+BW): 16 lanes; bf16 widened by a 16-bit shift, f16 by
//     vcvtph2ps, int8 by sign extension and vcvtdq2ps;
//   - AVX2 + FMA + F16C: the same at 8 lanes;
//   - portable C++.
// Widening is exact, so the only difference from an f32 GEMV over the
// widened weights is the order of the f32 sums. The activations stay f32:
// the weight-only formats promise that, so the bf16 / int8 dot-product
// instructions (vdpbf16ps, VNNI), which need the activations rounded to
// bf16 or int8 as well, are not used. The narrow formats halve or quarter
// the bytes a GEMV streams; the widening then takes a share of the time
// (bench/README.md: bf16 and int8 decode reach less of their bandwidth
// bound than f32).
#ifndef TWICE_KERNELS_CPU_LOWP_DOT_H_
#define TWICE_KERNELS_CPU_LOWP_DOT_H_

#include <cstdint>
#include <string_view>

#include "kernels/dtype.h"

namespace twice::kernels::cpu {

enum class Isa { kPortable, kAvx2, kAvx512 };
// The widest build this CPU runs (cached after the first call).
Isa CpuIsa();
// "avx512", "avx2", "portable".
std::string_view IsaName(Isa isa);

// Weights of dtype BF16, F16 or I8, row-major [n, k]; `scales` per row
// for I8 (nullptr otherwise).
struct LowpRows {
  DType dtype = DType::kBF16;
  const void* data = nullptr;
  const float* scales = nullptr;
  int64_t k = 0;
};

// y[r] = W[r, :] · x (+ bias[r]) for rows [r0, r1), with the kernels of
// `isa` (callers pass CpuIsa(); tests pass each one the CPU has).
void LowpGemvRows(Isa isa, const LowpRows& w, const float* x, const float* bias,
                  int64_t r0, int64_t r1, float* y);
// Rows [r0, r1) of W widened to f32 into `out` ((r1 - r0) * k floats; I8
// multiplied by its row scale).
void LowpRowsToF32(Isa isa, const LowpRows& w, int64_t r0, int64_t r1,
                   float* out);

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_LOWP_DOT_H_
