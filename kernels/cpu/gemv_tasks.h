// How the CPU matrix-vector products split their rows into pool tasks,
// shared by the f32 (linear_cpu.cc) and low-precision (linear_lowp_cpu.cc)
// kernels so both hand a worker the same amount of weight per task.
#ifndef TWICE_KERNELS_CPU_GEMV_TASKS_H_
#define TWICE_KERNELS_CPU_GEMV_TASKS_H_

#include <cstdint>

namespace twice::kernels::cpu {

// Weights per GEMV task: 64 Ki elements (256 KiB of f32, 128 KiB of bf16).
inline constexpr int64_t kGemvTaskElements = 64 * 1024;

// Weights per task of the bf16 vdpbf16ps GEMV (bf16_dot.h): 512 KiB. Each
// task starts four new streams of rows and leaves its last rows
// unprefetched (they are the next task's to fetch), which at 128 KiB cost
// the bf16 decode steps of Mamba-2 130M and Based 360M shapes 6-12 % on
// an Intel Xeon (2 threads, twice-bench engine); f32 tasks of 512 KiB
// made no difference there, and int8 tasks of 512 KiB were slower.
inline constexpr int64_t kBf16GemvTaskElements = 256 * 1024;

// How far ahead the bf16 and int8 GEMVs prefetch the weights they stream,
// into L2: far enough to cover the memory's latency at the rate they read,
// near enough that the lines are still in L2 when the loads reach them.
// On an Intel Xeon (2 threads), 12-24 KiB gave the bf16 GEMV over rows of
// 768 beyond the caches 27.7 GB/s against 21.5 without; the int8 decode
// steps of the Mamba-2 130M shape went from 134 to 156-164 tok/s at
// 16 KiB (152 at 8, 164 at 32 but Based slower there).
inline constexpr int64_t kGemvPrefetchBytes = 16 * 1024;

// v rounded up to a multiple of `to` (> 0).
inline int64_t RoundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_GEMV_TASKS_H_
