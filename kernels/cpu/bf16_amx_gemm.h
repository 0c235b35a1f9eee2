// Many rows of x times bf16 weights on AMX (Intel's Advanced Matrix
// Extensions, AMX-BF16), for CPUs that have it: one tdpbf16ps multiplies a
// tile of 16 rows of x by 32 columns with a tile of 32 columns by 16 rows
// of W into 16 x 16 f32 sums, 8192 multiply-adds in 16 cycles: 16 times
// what vdpbf16ps does in that time. On the Intel Xeon measured
// (bench/README.md), vdpbf16ps ran no faster than f32 FMAs and the vdpbf16ps
// GEMM below the f32 GEMM (bench/lowp_linear_bench.cc), so prefill with bf16
// weights needed the tiles to be ahead of f32 at all.
//
// Two kernels. AmxBf16GemmRows packs W 32 rows at a time into the panel
// layout of bf16_gemm.h (a 64-byte row holds one pair of columns of 16
// rows), the layout the tile product takes for its second operand, and
// meets every row of x in blocks of 32 (two tiles of x by two of W, four
// of sums). AmxBf16DotRows reads W's rows as the first operand where they
// lie and packs x instead (k a multiple of 32), which prefill uses.
// Inputs are rounded to bf16 as on every bf16 path (lowp_dot.h); products
// are exact and summed in f32, in another order than the other kernels.
#ifndef TWICE_KERNELS_CPU_BF16_AMX_GEMM_H_
#define TWICE_KERNELS_CPU_BF16_AMX_GEMM_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu/bf16_dot.h"

namespace twice::kernels::cpu {

// Rows of x a block of the product takes; Bf16Inputs packed for it must
// be padded to a multiple of this many rows (Pack's row_multiple).
inline constexpr int64_t kAmxInputRows = 32;

// Whether this process can run the tile product: the CPU has AMX-BF16
// (and AVX-512 BF16), the kernel saves the tile state, and it granted
// this process the tile data (asked once, on the first call; Linux
// refuses a process it did not grant with SIGILL on the first tile
// instruction). False on other CPUs and systems, and while
// SetAmxAllowed(false) holds. Once granted, the process's signal frames
// carry the 8 KiB of tile data: an alternate signal stack set up later
// must be at least the size Linux's AT_MINSIGSTKSZ then reports.
bool AmxBf16Usable();

// Lets benchmarks and tests compare the tile product with the AVX-512
// kernel on the same CPU; allowed by default.
void SetAmxAllowed(bool allowed);

// y[i * ldy + r] = W[r, :] · x.row(i) (+ bias[r]) for every row i of x and
// rows [r0, r1) of W (bf16, row-major [n, x.k()]), as Bf16GemmRows. x must
// be packed with row_multiple kAmxInputRows. Only where AmxBf16Usable().
void AmxBf16GemmRows(const uint16_t* w, const Bf16Inputs& x, const float* bias,
                     int64_t r0, int64_t r1, float* y, int64_t ldy);

// Rows of x for AmxBf16DotRows, in the tiles' second-operand layout: in
// blocks of 16 rows, block b holds [pair p][row c] = the pair of columns
// (2p, 2p + 1) of row 16b + c (zeros past the last row), so a 64-byte
// row of a tile is one pair of 16 inputs.
class Bf16TileInputs {
 public:
  // From packed rows (k a multiple of 32); reuses this object's memory.
  void Pack(const Bf16Inputs& x);

  int64_t rows() const { return rows_; }
  int64_t k() const { return k_; }
  int64_t blocks() const { return (rows_ + 15) / 16; }
  const uint32_t* block(int64_t b) const {
    return values_.data() + b * (k_ / 2) * 16;
  }

 private:
  std::vector<uint32_t> values_;
  int64_t rows_ = 0;
  int64_t k_ = 0;
};

// y[i * ldy + r] = W[r, :] · x.row(i) (+ bias[r]) for every row i of x and
// rows [r0, r1) of W (bf16, row-major [n, k], k a multiple of 32), on the
// tiles with W's rows as the first operand (read where they lie, no
// packing) and x as the second. Each output's sum runs the same tile
// instructions over the same pairs in the same order whatever the other
// rows of x are (a row of a batch is bit for bit that row alone). Faster
// than AmxBf16GemmRows for prefill; one row streams W slower than the
// vdpbf16ps GEMV (bench/README.md), so decode keeps that. Only where
// AmxBf16Usable().
void AmxBf16DotRows(const uint16_t* w, int64_t n, const Bf16TileInputs& x,
                    const float* bias, int64_t r0, int64_t r1, float* y,
                    int64_t ldy);

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_BF16_AMX_GEMM_H_
