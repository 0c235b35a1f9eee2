// What a replay test sets and reads of the CPU replay of the CUDA kernels
// (cuda_replay.h has the execution model; that header is for replayed
// kernel sources only).
#ifndef TWICE_TESTS_CUDA_REPLAY_REPLAY_CONTROL_H_
#define TWICE_TESTS_CUDA_REPLAY_REPLAY_CONTROL_H_

#include <cstdint>

namespace twice::cuda_replay {

// The order a block's threads run in between barriers: a read of another
// thread's write that lacks a barrier sees it in one order only.
enum class ThreadOrder { kIncreasing, kDecreasing };
void SetThreadOrder(ThreadOrder order);
// The shared memory a block may opt in to on the replayed device
// (cudaDevAttrMaxSharedMemoryPerBlockOptin): 227 KiB as on an H100 unless
// set, e.g. to 99 KiB for the paths an sm_86 device takes.
void SetSharedMemoryOptin(int bytes);
int SharedMemoryOptin();
// Strict: every pointer a kernel launch passes as an argument must be
// device memory (cudaMalloc) or pinned host memory (cudaHostAlloc), as on
// a device; off for the replay tests, which launch on host vectors.
void SetStrictDeviceMemory(bool strict);
// Kernels launched since the program started (a test's proof that the
// replay ran what it compares).
int64_t Launches();

}  // namespace twice::cuda_replay

#endif  // TWICE_TESTS_CUDA_REPLAY_REPLAY_CONTROL_H_
