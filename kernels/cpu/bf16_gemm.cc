#include "kernels/cpu/bf16_gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/x86_intrinsics.h"
#include "kernels/dtype.h"

namespace twice::kernels::cpu {
namespace {

// Rows of x per tile: 8 x 2 accumulators, 2 registers of W and one
// broadcast stay within the 32 vector registers.
constexpr int kTileRows = 8;
constexpr int64_t kLanes = 16;
static_assert(kBf16PanelRows == 2 * kLanes);

// Pairs of columns (k, k + 1) in a row of k values; an odd k's last pair
// has a zero second half.
int64_t PairsOf(int64_t k) { return (k + 1) / 2; }

// Rows [r, r + rows) of W as panel[p * 32 + j] = the pair p of row r + j
// (its two bf16 values in one 32-bit word, lower column in the low half,
// as vdpbf16ps pairs them); rows past `rows` are zero.
void PackPanel(const uint16_t* w, int64_t k, int64_t r, int64_t rows,
               uint32_t* panel) {
  const int64_t pairs = PairsOf(k);
  const int64_t whole = k / 2;
  for (int64_t j = 0; j < kBf16PanelRows; ++j) {
    if (j >= rows) {
      for (int64_t p = 0; p < pairs; ++p) panel[p * kBf16PanelRows + j] = 0;
      continue;
    }
    const uint16_t* row = w + (r + j) * k;
    for (int64_t p = 0; p < whole; ++p) {
      uint32_t pair;
      std::memcpy(&pair, row + 2 * p, sizeof(pair));  // rows may be unaligned
      panel[p * kBf16PanelRows + j] = pair;
    }
    if (whole < pairs) panel[whole * kBf16PanelRows + j] = row[k - 1];
  }
}

std::vector<uint32_t>& ThisThreadPanel(int64_t k) {
  thread_local std::vector<uint32_t> panel;
  const auto size = static_cast<size_t>(PairsOf(k) * kBf16PanelRows);
  if (panel.size() < size) panel.resize(size);
  return panel;
}

#if defined(__x86_64__)

#define TWICE_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,avx512bf16")))

// MR rows of x (xs) times the packed panel: y rows i, columns [r, r + 32)
// masked to `rows` of them.
template <int MR>
TWICE_AVX512_BF16 void Tile(const uint32_t* panel, int64_t pairs,
                            const uint16_t* const* xs, const float* bias,
                            int64_t r, int64_t rows, float* const* ys) {
  __m512 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    const auto w0 =
        reinterpret_cast<__m512bh>(_mm512_loadu_si512(panel + p * 32));
    const auto w1 =
        reinterpret_cast<__m512bh>(_mm512_loadu_si512(panel + p * 32 + 16));
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      uint32_t pair;
      std::memcpy(&pair, xs[i] + 2 * p, sizeof(pair));
      const auto a =
          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair)));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, w0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, w1);
    }
  }
  const int64_t low = std::min<int64_t>(rows, kLanes);
  const int64_t high = std::max<int64_t>(rows - kLanes, 0);
  const auto m0 = static_cast<__mmask16>((uint32_t{1} << low) - 1u);
  const auto m1 = static_cast<__mmask16>((uint32_t{1} << high) - 1u);
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
  if (bias != nullptr) {
    b0 = _mm512_maskz_loadu_ps(m0, bias + r);
    b1 = _mm512_maskz_loadu_ps(m1, bias + r + kLanes);
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    _mm512_mask_storeu_ps(ys[i] + r, m0, _mm512_add_ps(acc[i][0], b0));
    _mm512_mask_storeu_ps(ys[i] + r + kLanes, m1, _mm512_add_ps(acc[i][1], b1));
  }
}

template <int MR>
TWICE_AVX512_BF16 void TileAt(const uint32_t* panel, int64_t pairs,
                              const Bf16Inputs& x, int64_t i0,
                              const float* bias, int64_t r, int64_t rows,
                              float* y, int64_t ldy) {
  const uint16_t* xs[MR];
  float* ys[MR];
  for (int i = 0; i < MR; ++i) {
    xs[i] = x.row(i0 + i);
    ys[i] = y + (i0 + i) * ldy;
  }
  Tile<MR>(panel, pairs, xs, bias, r, rows, ys);
}

// The last rows of x (fewer than a tile), by their count.
using TileFunction = void (*)(const uint32_t*, int64_t, const Bf16Inputs&,
                              int64_t, const float*, int64_t, int64_t, float*,
                              int64_t);
constexpr TileFunction kTailTiles[kTileRows] = {
    nullptr,    &TileAt<1>, &TileAt<2>, &TileAt<3>,
    &TileAt<4>, &TileAt<5>, &TileAt<6>, &TileAt<7>};

}  // namespace

TWICE_AVX512_BF16 void Bf16GemmRows(const uint16_t* w, const Bf16Inputs& x,
                                    const float* bias, int64_t r0, int64_t r1,
                                    float* y, int64_t ldy) {
  const int64_t k = x.k();
  const int64_t m = x.rows();
  const int64_t pairs = PairsOf(k);
  uint32_t* panel = ThisThreadPanel(k).data();
  for (int64_t r = r0; r < r1; r += kBf16PanelRows) {
    const int64_t rows = std::min(kBf16PanelRows, r1 - r);
    PackPanel(w, k, r, rows, panel);
    int64_t i = 0;
    for (; i + kTileRows <= m; i += kTileRows) {
      TileAt<kTileRows>(panel, pairs, x, i, bias, r, rows, y, ldy);
    }
    if (i < m) kTailTiles[m - i](panel, pairs, x, i, bias, r, rows, y, ldy);
  }
}

#else  // !__x86_64__

}  // namespace

// No CPU without x86-64 has AVX-512 BF16, so nothing calls this; the same
// products in plain C++, through the same packed panel, so that the
// library links and means the same everywhere.
void Bf16GemmRows(const uint16_t* w, const Bf16Inputs& x, const float* bias,
                  int64_t r0, int64_t r1, float* y, int64_t ldy) {
  const int64_t k = x.k();
  const int64_t pairs = PairsOf(k);
  uint32_t* panel = ThisThreadPanel(k).data();
  for (int64_t r = r0; r < r1; r += kBf16PanelRows) {
    const int64_t rows = std::min(kBf16PanelRows, r1 - r);
    PackPanel(w, k, r, rows, panel);
    for (int64_t i = 0; i < x.rows(); ++i) {
      for (int64_t j = 0; j < rows; ++j) {
        float a = 0.0f;
        for (int64_t p = 0; p < pairs; ++p) {
          const uint32_t pair = panel[p * kBf16PanelRows + j];
          a += Bf16ToF32(static_cast<uint16_t>(pair)) *
                   Bf16ToF32(x.row(i)[2 * p]) +
               Bf16ToF32(static_cast<uint16_t>(pair >> 16)) *
                   Bf16ToF32(x.row(i)[2 * p + 1]);
        }
        y[i * ldy + r + j] = bias != nullptr ? a + bias[r + j] : a;
      }
    }
  }
}

#endif  // __x86_64__

}  // namespace twice::kernels::cpu
