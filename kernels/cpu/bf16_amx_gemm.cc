#include "kernels/cpu/bf16_amx_gemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/lowp_dot.h"

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define TWICE_HAS_AMX_BUILD 1
#endif

#include "kernels/cpu/x86_intrinsics.h"

namespace twice::kernels::cpu {
namespace {

std::atomic<bool> amx_allowed{true};

}  // namespace

void SetAmxAllowed(bool allowed) { amx_allowed.store(allowed); }

void Bf16TileInputs::Pack(const Bf16Inputs& x) {
  rows_ = x.rows();
  k_ = x.k();
  const int64_t pairs = k_ / 2;
  const auto size = static_cast<size_t>(blocks() * pairs * 16);
  if (values_.size() < size) values_.resize(size);
  std::fill(values_.begin(), values_.begin() + size, 0u);
  for (int64_t i = 0; i < rows_; ++i) {
    uint32_t* out = values_.data() + (i / 16) * pairs * 16 + i % 16;
    const uint16_t* row = x.row(i);
    for (int64_t p = 0; p < pairs; ++p) {
      uint32_t pair;
      std::memcpy(&pair, row + 2 * p, sizeof(pair));
      out[p * 16] = pair;
    }
  }
}

#if defined(TWICE_HAS_AMX_BUILD)

namespace {

constexpr int64_t kTileLanes = 16;
static_assert(kBf16PanelRows == 2 * kTileLanes);
static_assert(kAmxInputRows == 2 * kTileLanes);
// Pairs of columns in one tile of the product (64 bytes of bf16 per row
// of x).
constexpr int64_t kTilePairs = 16;

// Linux's arch_prctl codes for the permission to use the tile data
// (asm/prctl.h; XFEATURE_XTILEDATA is bit 18 of XCR0).
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

bool ProcessMayUseTiles() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool amx_bf16 = (edx & (1u << 22)) != 0;
  const bool amx_tile = (edx & (1u << 24)) != 0;
  if (!amx_bf16 || !amx_tile) return false;
  // The kernel must save the tile configuration and data (XCR0 bits 17 and
  // 18), which needs OSXSAVE before xgetbv may run.
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & bit_OSXSAVE) == 0) {
    return false;
  }
  uint32_t xcr0_low = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if ((xcr0_low & (3u << 17)) != (3u << 17)) return false;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

int64_t PaddedPairs(int64_t k) {
  return ((k + 1) / 2 + kTilePairs - 1) / kTilePairs * kTilePairs;
}

// Rows [r, r + rows) of W as panel[p * 32 + j] = the pair p of row r + j,
// as bf16_gemm.h packs it, for PaddedPairs(k) pairs: pairs past the row's
// end and rows past `rows` are zero (their products with the zero columns
// and rows of x must not be NaN).
void PackTilePanel(const uint16_t* w, int64_t k, int64_t r, int64_t rows,
                   uint32_t* panel) {
  const int64_t pairs = PaddedPairs(k);
  const int64_t whole = k / 2;
  std::memset(panel, 0, static_cast<size_t>(pairs * kBf16PanelRows) * 4);
  for (int64_t j = 0; j < rows; ++j) {
    const uint16_t* row = w + (r + j) * k;
    for (int64_t p = 0; p < whole; ++p) {
      uint32_t pair;
      std::memcpy(&pair, row + 2 * p, sizeof(pair));  // rows may be unaligned
      panel[p * kBf16PanelRows + j] = pair;
    }
    if (k % 2 != 0) panel[whole * kBf16PanelRows + j] = row[k - 1];
  }
}

std::vector<uint32_t>& ThisThreadTilePanel(int64_t k) {
  thread_local std::vector<uint32_t> panel;
  const auto size = static_cast<size_t>(PaddedPairs(k) * kBf16PanelRows);
  if (panel.size() < size) panel.resize(size);
  return panel;
}

// ldtilecfg's 64-byte operand (palette 1): bytes per row and rows of each
// of the eight tile registers.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Tiles 0-3: sums (x block a, W half b) at 2a + b; 4-5: x; 6-7: W. All
// 16 rows of 64 bytes.
#define TWICE_AMX \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl")))

TWICE_AMX void ConfigureTiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = 16;
  }
  // GCC 12 does not see that ldtilecfg reads the configuration and drops
  // the stores of the loop above (the tiles then stay unconfigured and the
  // first tile instruction faults); the empty asm makes them visible.
  __asm__ volatile("" : : "r"(&config) : "memory");
  _tile_loadconfig(&config);
}

// The 32 x 32 block of sums for rows [i, i + 32) of x and the panel, into
// sums[2a + b][q][l] (x row i + 16a + q, W row 16b + l of the panel).
// Needs ConfigureTiles() on this thread.
TWICE_AMX void Block(const uint32_t* panel, int64_t steps, const uint16_t* x0,
                     int64_t x_stride_bytes,
                     float (*sums)[kTileLanes][kTileLanes]) {
  const uint16_t* x1 = x0 + kTileLanes * (x_stride_bytes / 2);
  // GCC 12's tile loads are asm statements that do not say they read
  // memory: this makes the panel's and x's stores before them visible.
  __asm__ volatile("" : : : "memory");
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t s = 0; s < steps; ++s) {
    const uint32_t* w = panel + s * kTilePairs * kBf16PanelRows;
    _tile_loadd(4, x0 + s * 2 * kTilePairs, x_stride_bytes);
    _tile_loadd(5, x1 + s * 2 * kTilePairs, x_stride_bytes);
    _tile_loadd(6, w, kBf16PanelRows * 4);
    _tile_loadd(7, w + kTileLanes, kBf16PanelRows * 4);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, sums[0], kTileLanes * 4);
  _tile_stored(1, sums[1], kTileLanes * 4);
  _tile_stored(2, sums[2], kTileLanes * 4);
  _tile_stored(3, sums[3], kTileLanes * 4);
}

TWICE_AMX void ReleaseTiles() { _tile_release(); }

// Rows [i, min(i + 32, m)) of y, columns [r, r + rows), from the block.
TWICE_AMX void StoreBlock(float (*sums)[kTileLanes][kTileLanes],
                          const float* bias, int64_t i, int64_t m, int64_t r,
                          int64_t rows, float* y, int64_t ldy) {
  const int64_t low = std::min<int64_t>(rows, kTileLanes);
  const int64_t high = std::max<int64_t>(rows - kTileLanes, 0);
  const __mmask16 masks[2] = {
      static_cast<__mmask16>((uint32_t{1} << low) - 1u),
      static_cast<__mmask16>((uint32_t{1} << high) - 1u)};
  __m512 biases[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  if (bias != nullptr) {
    biases[0] = _mm512_maskz_loadu_ps(masks[0], bias + r);
    biases[1] = _mm512_maskz_loadu_ps(masks[1], bias + r + kTileLanes);
  }
  for (int a = 0; a < 2; ++a) {
    for (int64_t q = 0; q < kTileLanes; ++q) {
      const int64_t row = i + a * kTileLanes + q;
      if (row >= m) return;
      for (int b = 0; b < 2; ++b) {
        const __m512 v =
            _mm512_add_ps(_mm512_loadu_ps(sums[2 * a + b][q]), biases[b]);
        _mm512_mask_storeu_ps(y + row * ldy + r + b * kTileLanes, masks[b], v);
      }
    }
  }
}

// Rows [r, r + 16) or [r, r + 32) of W (w0, w1 = the second 16 or null)
// times one or two blocks of 16 inputs (x0, x1 or null): sums[2a + b] =
// tile (W group a, inputs b), [W row][input]. Needs ConfigureTiles().
template <bool kTwoGroups, bool kTwoBlocks>
TWICE_AMX void DotBlock(const uint16_t* w0, const uint16_t* w1,
                        int64_t w_stride_bytes, const uint32_t* x0,
                        const uint32_t* x1, int64_t steps,
                        float (*sums)[kTileLanes][kTileLanes]) {
  __asm__ volatile("" : : : "memory");  // as in Block
  _tile_zero(0);
  if constexpr (kTwoBlocks) _tile_zero(1);
  if constexpr (kTwoGroups) _tile_zero(2);
  if constexpr (kTwoGroups && kTwoBlocks) _tile_zero(3);
  for (int64_t s = 0; s < steps; ++s) {
    _tile_loadd(4, w0 + s * 2 * kTilePairs, w_stride_bytes);
    _tile_loadd(6, x0 + s * kTilePairs * kTileLanes, kTileLanes * 4);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (kTwoBlocks) {
      _tile_loadd(7, x1 + s * kTilePairs * kTileLanes, kTileLanes * 4);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (kTwoGroups) {
      _tile_loadd(5, w1 + s * 2 * kTilePairs, w_stride_bytes);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (kTwoBlocks) _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, sums[0], kTileLanes * 4);
  if constexpr (kTwoBlocks) _tile_stored(1, sums[1], kTileLanes * 4);
  if constexpr (kTwoGroups) _tile_stored(2, sums[2], kTileLanes * 4);
  if constexpr (kTwoGroups && kTwoBlocks) {
    _tile_stored(3, sums[3], kTileLanes * 4);
  }
}

using DotBlockFunction = void (*)(const uint16_t*, const uint16_t*, int64_t,
                                  const uint32_t*, const uint32_t*, int64_t,
                                  float (*)[kTileLanes][kTileLanes]);
// By [two groups][two blocks].
constexpr DotBlockFunction kDotBlocks[2][2] = {
    {&DotBlock<false, false>, &DotBlock<false, true>},
    {&DotBlock<true, false>, &DotBlock<true, true>}};

// The last group of W when it has fewer than 16 rows: those rows and zeros,
// so the tile loads stay inside memory (the values, and so the sums, are
// W's).
std::vector<uint16_t>& ThisThreadLastGroup(int64_t k) {
  thread_local std::vector<uint16_t> rows;
  if (rows.size() < static_cast<size_t>(kTileLanes * k)) {
    rows.resize(static_cast<size_t>(kTileLanes * k));
  }
  return rows;
}

}  // namespace

bool AmxBf16Usable() {
  // The epilogue (StoreBlock) is AVX-512; every CPU with AMX has it, but
  // the kernel must not depend on that.
  static const bool usable =
      CpuIsa() == Isa::kAvx512Bf16 && ProcessMayUseTiles();
  return usable && amx_allowed.load(std::memory_order_relaxed);
}

void AmxBf16GemmRows(const uint16_t* w, const Bf16Inputs& x, const float* bias,
                     int64_t r0, int64_t r1, float* y, int64_t ldy) {
  const int64_t k = x.k();
  const int64_t m = x.rows();
  const int64_t steps = PaddedPairs(k) / kTilePairs;
  const int64_t x_stride_bytes = x.stride() * 2;
  uint32_t* panel = ThisThreadTilePanel(k).data();
  alignas(64) float sums[4][kTileLanes][kTileLanes];
  // The configuration holds across calls; the tiles' contents do not (the
  // x86-64 psABI makes them caller-saved), so a Block loads, multiplies
  // and stores its tiles with no call in between.
  ConfigureTiles();
  for (int64_t r = r0; r < r1; r += kBf16PanelRows) {
    const int64_t rows = std::min(kBf16PanelRows, r1 - r);
    PackTilePanel(w, k, r, rows, panel);
    for (int64_t i = 0; i < m; i += kAmxInputRows) {
      Block(panel, steps, x.row(i), x_stride_bytes, sums);
      StoreBlock(sums, bias, i, m, r, rows, y, ldy);
    }
  }
  ReleaseTiles();
}

void AmxBf16DotRows(const uint16_t* w, int64_t n, const Bf16TileInputs& x,
                    const float* bias, int64_t r0, int64_t r1, float* y,
                    int64_t ldy) {
  const int64_t k = x.k();
  const int64_t m = x.rows();
  const int64_t steps = k / (2 * kTilePairs);
  alignas(64) float sums[4][kTileLanes][kTileLanes];
  ConfigureTiles();
  for (int64_t r = r0; r < r1; r += 2 * kTileLanes) {
    const int groups = r1 - r > kTileLanes ? 2 : 1;
    // Tile loads read whole groups of 16 rows: a group past W's end reads
    // a zero-padded copy of its rows (same row stride) instead.
    const uint16_t* rows_of[2] = {
        w + r * k, groups == 2 ? w + (r + kTileLanes) * k : nullptr};
    const int64_t last_first = r + (groups - 1) * kTileLanes;
    if (last_first + kTileLanes > n) {
      uint16_t* copy = ThisThreadLastGroup(k).data();
      std::memcpy(copy, w + last_first * k,
                  static_cast<size_t>((n - last_first) * k) * 2);
      std::memset(copy + (n - last_first) * k, 0,
                  static_cast<size_t>((last_first + kTileLanes - n) * k) * 2);
      rows_of[groups - 1] = copy;
    }
    for (int64_t b = 0; b < x.blocks(); b += 2) {
      const int blocks = b + 1 < x.blocks() ? 2 : 1;
      kDotBlocks[groups - 1][blocks - 1](
          rows_of[0], groups == 2 ? rows_of[1] : nullptr, k * 2, x.block(b),
          blocks == 2 ? x.block(b + 1) : nullptr, steps, sums);
      for (int a = 0; a < groups; ++a) {
        for (int e = 0; e < blocks; ++e) {
          const float(*tile)[kTileLanes] = sums[2 * a + e];
          const int64_t rows = std::min(kTileLanes, r1 - r - a * kTileLanes);
          const int64_t inputs = std::min(kTileLanes, m - (b + e) * kTileLanes);
          for (int64_t c = 0; c < inputs; ++c) {
            float* out =
                y + ((b + e) * kTileLanes + c) * ldy + r + a * kTileLanes;
            const float* add =
                bias != nullptr ? bias + r + a * kTileLanes : nullptr;
            for (int64_t q = 0; q < rows; ++q) {
              out[q] = add != nullptr ? tile[q][c] + add[q] : tile[q][c];
            }
          }
        }
      }
    }
  }
  ReleaseTiles();
}

#else  // !TWICE_HAS_AMX_BUILD

bool AmxBf16Usable() { return false; }

// Nothing calls this where AmxBf16Usable() is false; the same sums by the
// portable form of the panel kernel, so the library links everywhere.
void AmxBf16GemmRows(const uint16_t* w, const Bf16Inputs& x, const float* bias,
                     int64_t r0, int64_t r1, float* y, int64_t ldy) {
  Bf16GemmRows(w, x, bias, r0, r1, y, ldy);
}

// Nothing calls this where AmxBf16Usable() is false; the same products
// one by one, so the library links everywhere.
void AmxBf16DotRows(const uint16_t* w, int64_t n, const Bf16TileInputs& x,
                    const float* bias, int64_t r0, int64_t r1, float* y,
                    int64_t ldy) {
  (void)n;
  const int64_t k = x.k();
  for (int64_t i = 0; i < x.rows(); ++i) {
    const uint32_t* block = x.block(i / 16);
    for (int64_t r = r0; r < r1; ++r) {
      float a = 0.0f;
      for (int64_t p = 0; p < k / 2; ++p) {
        const uint32_t pair = block[p * 16 + i % 16];
        a += Bf16ToF32(w[r * k + 2 * p]) *
                 Bf16ToF32(static_cast<uint16_t>(pair)) +
             Bf16ToF32(w[r * k + 2 * p + 1]) *
                 Bf16ToF32(static_cast<uint16_t>(pair >> 16));
      }
      y[i * ldy + r] = bias != nullptr ? a + bias[r] : a;
    }
  }
}

#endif  // TWICE_HAS_AMX_BUILD

}  // namespace twice::kernels::cpu
