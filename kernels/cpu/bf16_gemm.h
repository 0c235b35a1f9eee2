// Many rows of x times bf16 weights by vdpbf16ps, in the outer-product
// form of a GEMM micro-kernel: a panel of 32 rows of W is repacked so that
// one 64-byte load holds the same pair of columns (k, k + 1) of 16 rows,
// and each row of x contributes that pair by one broadcast. A tile of 8
// rows of x by the 32 rows of W keeps 16 accumulators; per pair of columns
// it costs 2 loads of W, 8 broadcasts and 16 vdpbf16ps (32 multiply-adds
// each, twice an f32 FMA's), where the f32 panels it replaces widen W and
// run the f32 GEMM. The panel is packed as the product goes (32 x k
// weights at a time), so W stays as stored.
//
// Inputs are rounded to bf16 as on every bf16 path (lowp_dot.h); the
// products are exact in f32 and are summed in f32.
#ifndef TWICE_KERNELS_CPU_BF16_GEMM_H_
#define TWICE_KERNELS_CPU_BF16_GEMM_H_

#include <cstdint>

#include "kernels/cpu/bf16_dot.h"

namespace twice::kernels::cpu {

// Rows of W one packed panel holds; a task of the pool takes whole panels.
inline constexpr int64_t kBf16PanelRows = 32;

// y[i * ldy + r] = W[r, :] · x.row(i) (+ bias[r]) for every row i of x and
// rows [r0, r1) of W (bf16, row-major [n, x.k()]). Any range works; the
// panel buffer is this thread's. Runs on CPUs with AVX-512 BF16 only
// (lowp_dot.h: CpuIsa() == Isa::kAvx512Bf16).
void Bf16GemmRows(const uint16_t* w, const Bf16Inputs& x, const float* bias,
                  int64_t r0, int64_t r1, float* y, int64_t ldy);

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_BF16_GEMM_H_
