// How the CPU matrix-vector products split their rows into pool tasks,
// shared by the f32 (linear_cpu.cc) and low-precision (linear_lowp_cpu.cc)
// kernels so both hand a worker the same amount of weight per task.
#ifndef TWICE_KERNELS_CPU_GEMV_TASKS_H_
#define TWICE_KERNELS_CPU_GEMV_TASKS_H_

#include <cstdint>

namespace twice::kernels::cpu {

// Weights per GEMV task: 64 Ki elements (256 KiB of f32, 128 KiB of bf16).
inline constexpr int64_t kGemvTaskElements = 64 * 1024;

// v rounded up to a multiple of `to` (> 0).
inline int64_t RoundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_GEMV_TASKS_H_
