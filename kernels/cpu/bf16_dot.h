// Products of bf16 weight rows with inputs rounded to bf16, by vdpbf16ps
// (AVX-512 BF16): each instruction multiplies 32 weights by 32 inputs (the
// products are exact in f32) and adds them pairwise into 16 f32 lanes, so a
// 64-byte load of W costs one instruction instead of a widening and two
// FMAs. lowp_dot.h says why the input is rounded to bf16 on every path.
//
// The input is packed once per product (Bf16Inputs), not once per task of
// the pool: a decode step's LM head alone is several hundred tasks.
#ifndef TWICE_KERNELS_CPU_BF16_DOT_H_
#define TWICE_KERNELS_CPU_BF16_DOT_H_

#include <bit>
#include <cstdint>
#include <vector>

namespace twice::kernels::cpu {

// The bits of `v` rounded to the nearest bf16 (ties to even) in the upper
// half, as F32ToBf16 rounds; branch-free so that loops over it vectorise.
inline uint32_t RoundedBf16Bits(float v) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;  // stays a quiet NaN
  return nan ? ((bits | 0x00400000u) & 0xffff0000u) : rounded;
}

// Rows of x as the products take them: each rounded to bf16 and padded
// with zeros to a multiple of 32 elements, so a row's tail needs a masked
// load of W only.
class Bf16Inputs {
 public:
  // Packs x (row-major [m, k]); reuses this object's memory. With
  // row_multiple > 1, rows of zeros follow up to the next multiple of it
  // (a matrix unit loads whole blocks of rows); one row, as decode packs,
  // is not padded by default.
  void Pack(const float* x, int64_t m, int64_t k, int64_t row_multiple = 1);

  int64_t rows() const { return rows_; }
  int64_t k() const { return k_; }
  // Elements from one row to the next: k rounded up to a multiple of 32.
  int64_t stride() const { return stride_; }
  const uint16_t* row(int64_t i) const { return values_.data() + i * stride_; }

 private:
  std::vector<uint16_t> values_;
  int64_t rows_ = 0;
  int64_t k_ = 0;
  int64_t stride_ = 0;
};

// y[i * ldy + r] = W[r, :] · x.row(i) (+ bias[r]) for every row i of x and
// rows [r0, r1) of W (bf16, row-major [n, x.k()]). Four rows of W at a
// time; each load of W serves two rows of x, and every (row, input) pair
// runs the same instructions in the same order whatever x.rows() is, so a
// row of a batch is bit for bit that row alone. Runs on CPUs with AVX-512
// BF16 only (lowp_dot.h: CpuIsa() == Isa::kAvx512Bf16).
void Bf16DotRows(const uint16_t* w, const Bf16Inputs& x, const float* bias,
                 int64_t r0, int64_t r1, float* y, int64_t ldy);

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_BF16_DOT_H_
