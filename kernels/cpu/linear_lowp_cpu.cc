// Linear on CPU with bf16 / f16 / int8 weights (f32 x, y, accumulation).
//
// One row (decode): the fused GEMV of lowp_dot.h (int8: int8_dot.h, on x
// quantized once here), which streams W without converting it to f32, in
// tasks of about 128 KiB of W handed out to the pool (bf16 by vdpbf16ps:
// 512 KiB, gemv_tasks.h).
//
// int8 W, any number of rows (batched decode, prefill): integer products
// as for one row (Int8GemmRows), tiles of x against each group of W while
// it is in cache; every result is bit for bit its row's one-row product.
//
// bf16 W on CPUs with AVX-512 BF16, one to 32-64 rows (decode, batched
// decode, short appends): the vdpbf16ps product of bf16_dot.h on x packed
// once here; each row's result is bit for bit its one-row result. More
// rows (prefill): on CPUs with AMX-BF16 the tile products of
// bf16_amx_gemm.h (2.2-3.5x the f32 GEMM's rate and 3.7-5.6x the
// vdpbf16ps GEMM's on an Intel Xeon with both,
// bench/lowp_linear_bench.cc), elsewhere the vdpbf16ps GEMM micro-kernel
// of bf16_gemm.h (about 3x the f32 GEMM's rate on the AMD EPYC it was
// tuned on); their sums run in another order, so those rows are not bit
// for bit one-row results (as with the f32 panels before them).
//
// Otherwise (f16, bf16 on CPUs without AVX-512 BF16): W is widened
// panel by panel (at most kPanelRows rows, a few hundred KiB of f32) into
// a per-thread scratch buffer, and each panel runs the f32 kernel of
// linear_cpu.cc (our small-m kernel, or single-threaded BLAS SGEMM for
// m > 16). The widening costs O(n·k) against the product's O(m·n·k), and
// the weight is never held in f32 as a whole.
//   - With enough outputs, tasks take slices of W's rows (each slice's
//     panels are private to one core).
//   - With few (narrow projections), each panel is widened once on the
//     calling thread and the pool splits the rows of x.
// A bf16 W multiplies x rounded to bf16 on every path (lowp_dot.h says
// why), so one row and many rows compute the same products.
#include <algorithm>
#include <vector>

#include "kernels/cpu/bf16_amx_gemm.h"
#include "kernels/cpu/bf16_dot.h"
#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemv_tasks.h"
#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/lowp_dot.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace twice::kernels::cpu {
namespace {

// Below this many weights one thread is faster than waking the others.
constexpr int64_t kMinParallelElements = 64 * 1024;
// Rows of W widened at a time for the f32 kernels: 256 rows of k = 1024
// are 1 MiB of f32, which stays in a core's L2 while every row of x
// passes over it.
constexpr int64_t kPanelRows = 256;
constexpr int64_t kMinPanelElements = 64 * 1024;
// Rows of x per task when the pool splits x.
constexpr int64_t kMinXRows = 64;

// Rows per panel: kPanelRows, or more for short rows so that a panel is
// still worth a BLAS call.
int64_t PanelRows(int64_t k) {
  return RoundUp(std::max(kPanelRows, kMinPanelElements / k), 16);
}

// y[:, r0:r1] for all m rows of x, panel by panel, on the calling thread.
void PanelsOfRows(Isa isa, const float* x, int64_t m, const LowpRows& w,
                  int64_t n, const float* bias, int64_t r0, int64_t r1,
                  float* y) {
  const int64_t k = w.k;
  const int64_t panel = PanelRows(k);
  float* scratch = ScratchFloats(0, static_cast<size_t>(panel * k));
  for (int64_t p = r0; p < r1; p += panel) {
    const int64_t rows = std::min(panel, r1 - p);
    LowpRowsToF32(isa, w, p, p + rows, scratch);
    LinearPanelF32(x, m, k, scratch, rows, n,
                   bias != nullptr ? bias + p : nullptr, y + p);
  }
}

// Rows of x up to which a bf16 W goes through the batched vdpbf16ps kernel
// (Bf16DotRows: four rows of W and two of x at a time, results bit for
// bit those of one row, which batched decode needs) rather than the GEMM
// micro-kernel (Bf16GemmRows). Measured per row of x against the f32
// panels that came before the micro-kernel (2 threads,
// bench/lowp_linear_bench.cc): k = 768, 64 rows: 18 us against 35 us;
// k = 4096 the kernel's rows no longer stay in L1 and the panels' BLAS
// GEMM was ahead from about 64 rows on.
int64_t MaxBf16BatchRows(int64_t k) { return k <= 2048 ? 64 : 32; }

// Rows of x per pass over W in an int8 product of many rows: about 256 KiB
// of int16 inputs, which stay in a core's L2 while the groups of W stream
// past them.
int64_t Int8XTileRows(int64_t k) {
  return std::max<int64_t>(4, (256 * 1024 / (2 * k)) / 4 * 4);
}

// An int8 W times m > 1 rows of x as integer products (Int8GemmRows), for
// any m: every result is bit for bit that row's one-row product, so a
// batch of sequences steps exactly as each would alone and a prefill
// computes what its steps would. At 1 dpwssd (32 multiply-adds) per cycle
// it is also about twice the f32 GEMM's rate: 11-21 us per row of x where
// the f32 weights take 26-47 us (bench/lowp_linear_bench.cc, m 64-2048).
void Int8Batch(const float* x, int64_t m, const LowpRows& w, int64_t n,
               const float* bias, bool parallel, float* y) {
  const int64_t k = w.k;
  const int64_t tile = Int8XTileRows(k);
  // One tile of quantized rows at a time: a long prefill does not leave
  // its whole input quantized behind in this thread's buffer.
  thread_local std::vector<QuantizedInput> this_thread_inputs;
  // A local name, as for one row below.
  std::vector<QuantizedInput>& inputs = this_thread_inputs;
  if (inputs.size() < static_cast<size_t>(std::min(m, tile))) {
    inputs.resize(static_cast<size_t>(std::min(m, tile)));
  }
  const Int8Build build = CpuInt8Build();
  const Int8Rows rows{static_cast<const int8_t*>(w.data), w.scales, k};
  const int64_t per_task =
      RoundUp(std::max<int64_t>(2 * kGemvTaskElements / k, 16), 16);
  constexpr int64_t kQuantizeRowsPerTask = 16;
  for (int64_t i0 = 0; i0 < m; i0 += tile) {
    const int64_t x_rows = std::min(tile, m - i0);
    const float* x_tile = x + i0 * k;
    float* y_tile = y + i0 * n;
    if (!parallel) {
      for (int64_t i = 0; i < x_rows; ++i) {
        QuantizeInput(x_tile + i * k, k, inputs[i]);
      }
      Int8GemmRows(build, rows, inputs.data(), x_rows, bias, 0, n, y_tile, n);
      continue;
    }
    ParallelFor((x_rows + kQuantizeRowsPerTask - 1) / kQuantizeRowsPerTask,
                [&](int64_t t) {
                  const int64_t end =
                      std::min(x_rows, (t + 1) * kQuantizeRowsPerTask);
                  for (int64_t i = t * kQuantizeRowsPerTask; i < end; ++i) {
                    QuantizeInput(x_tile + i * k, k, inputs[i]);
                  }
                });
    ParallelFor((n + per_task - 1) / per_task, [&](int64_t t) {
      Int8GemmRows(build, rows, inputs.data(), x_rows, bias, t * per_task,
                   std::min(n, (t + 1) * per_task), y_tile, n);
    });
  }
}

// A bf16 W on a CPU with vdpbf16ps; x is rounded and packed once here,
// not once per task. Up to MaxBf16BatchRows(k) rows of x go through
// Bf16DotRows (a row of a batch bit for bit that row alone, as decode
// batches need) in tasks of about 512 KiB of W; more rows through the
// tile product (bf16_amx_gemm.h) where this process may use AMX, or the
// GEMM micro-kernel (bf16_gemm.h), in tasks of whole 32-row panels.
void Bf16Product(const float* x, int64_t m, const LowpRows& w, int64_t n,
                 const float* bias, bool parallel, float* y) {
  const int64_t k = w.k;
  thread_local Bf16Inputs this_thread_inputs;
  // A local name: the pool's tasks must read this thread's inputs, and a
  // thread_local named in the lambda would be each worker's own.
  Bf16Inputs& inputs = this_thread_inputs;
  thread_local Bf16TileInputs this_thread_tile_inputs;
  Bf16TileInputs& tile_inputs = this_thread_tile_inputs;
  const bool gemm = m > MaxBf16BatchRows(k);
  const bool amx = gemm && AmxBf16Usable();
  // On the tiles: W's rows as the tiles' first operand where they are whole
  // tile rows (k a multiple of 32: no packing; 1.0-3.3x the packed GEMM's
  // rate, most at 65-256 rows, bench/lowp_linear_bench.cc), else the
  // packed GEMM.
  const bool tile_rows = amx && k % 32 == 0;
  const bool tiles = amx && !tile_rows;
  inputs.Pack(x, m, k, tiles ? kAmxInputRows : 1);
  if (tile_rows) tile_inputs.Pack(inputs);
  const auto* rows_of_w = static_cast<const uint16_t*>(w.data);
  const auto product = [&](int64_t r0, int64_t r1) {
    if (tiles) {
      AmxBf16GemmRows(rows_of_w, inputs, bias, r0, r1, y, n);
    } else if (tile_rows) {
      AmxBf16DotRows(rows_of_w, n, tile_inputs, bias, r0, r1, y, n);
    } else if (gemm) {
      Bf16GemmRows(rows_of_w, inputs, bias, r0, r1, y, n);
    } else {
      Bf16DotRows(rows_of_w, inputs, bias, r0, r1, y, n);
    }
  };
  if (!parallel) {
    product(0, n);
    return;
  }
  // GEMV tasks of kBf16GemvTaskElements, but at least two per thread, so
  // that a narrow product still gives every thread work.
  const int64_t threads = DefaultPool().threads();
  const int64_t rows =
      gemm ? (tile_rows ? 2 * kBf16PanelRows : kBf16PanelRows)
           : RoundUp(std::max<int64_t>(
                         std::min(kBf16GemvTaskElements / k,
                                  (n + 2 * threads - 1) / (2 * threads)),
                         4),
                     4);
  ParallelFor((n + rows - 1) / rows, [&](int64_t t) {
    product(t * rows, std::min(n, (t + 1) * rows));
  });
}

}  // namespace

void LinearLowp(const float* x, int64_t m, const LowpRows& w, int64_t n,
                const float* bias, float* y) {
  const Isa isa = CpuIsa();
  const int64_t k = w.k;
  const int threads = DefaultPool().threads();
  const bool parallel = threads > 1 && n * k >= kMinParallelElements;
  if (m > 1 && w.dtype == DType::kI8) {
    Int8Batch(x, m, w, n, bias, parallel, y);
    return;
  }
  if (w.dtype == DType::kBF16 && isa == Isa::kAvx512Bf16) {
    Bf16Product(x, m, w, n, bias, parallel, y);
    return;
  }
  if (m > 1 && w.dtype == DType::kBF16) {
    // Read by the pool's tasks while this thread waits for them.
    thread_local std::vector<float> rounded;
    if (rounded.size() < static_cast<size_t>(m * k)) {
      rounded.resize(static_cast<size_t>(m * k));
    }
    RoundToBf16(x, m * k, rounded.data());
    x = rounded.data();
  }
  if (m == 1 && w.dtype == DType::kI8) {
    thread_local QuantizedInput this_thread_input;
    // A local name: the pool's tasks must read this thread's buffer, and a
    // thread_local named in the lambda would be each worker's own.
    QuantizedInput& quantized = this_thread_input;
    QuantizeInput(x, k, quantized);
    const Int8Build build = CpuInt8Build();
    const Int8Rows rows{static_cast<const int8_t*>(w.data), w.scales, k};
    if (!parallel) {
      Int8GemvRows(build, rows, quantized, bias, 0, n, y);
      return;
    }
    // int8 rows are half as long in bytes as bf16: twice the rows per task,
    // in whole groups of 16 rows (i8_layout.h).
    const int64_t per_task =
        RoundUp(std::max<int64_t>(2 * kGemvTaskElements / k, 16), 16);
    ParallelFor((n + per_task - 1) / per_task, [&](int64_t t) {
      Int8GemvRows(build, rows, quantized, bias, t * per_task,
                   std::min(n, (t + 1) * per_task), y);
    });
    return;
  }
  if (m == 1) {
    if (!parallel) {
      LowpGemvRows(isa, w, x, bias, 0, n, y);
      return;
    }
    const int64_t rows =
        RoundUp(std::max<int64_t>(kGemvTaskElements / k, 4), 4);
    ParallelFor((n + rows - 1) / rows, [&](int64_t t) {
      LowpGemvRows(isa, w, x, bias, t * rows, std::min(n, (t + 1) * rows), y);
    });
    return;
  }
  if (!parallel) {
    PanelsOfRows(isa, x, m, w, n, bias, 0, n, y);
    return;
  }
  const int64_t panel = PanelRows(k);
  if (n >= 2 * threads * 64 || m <= 16) {
    // Slices of W's rows, about two per thread (a core shared with other
    // work then holds up little), each a whole number of 16 rows.
    const int64_t want =
        std::max<int64_t>(1, std::min<int64_t>(2 * threads, (n + 63) / 64));
    const int64_t step = RoundUp((n + want - 1) / want, 16);
    ParallelFor((n + step - 1) / step, [&](int64_t t) {
      const int64_t r0 = t * step;
      PanelsOfRows(isa, x, m, w, n, bias, r0, std::min(n, r0 + step), y);
    });
    return;
  }
  // Narrow W: widen each panel once here, split the rows of x.
  float* scratch = ScratchFloats(1, static_cast<size_t>(panel * k));
  for (int64_t p = 0; p < n; p += panel) {
    const int64_t rows = std::min(panel, n - p);
    LowpRowsToF32(isa, w, p, p + rows, scratch);
    const int64_t want =
        std::max<int64_t>(1, std::min<int64_t>(2 * threads, m / kMinXRows));
    const int64_t step = (m + want - 1) / want;
    ParallelFor((m + step - 1) / step, [&](int64_t t) {
      const int64_t i0 = t * step;
      const int64_t i1 = std::min(m, i0 + step);
      LinearPanelF32(x + i0 * k, i1 - i0, k, scratch, rows, n,
                     bias != nullptr ? bias + p : nullptr, y + i0 * n + p);
    });
  }
}

}  // namespace twice::kernels::cpu
