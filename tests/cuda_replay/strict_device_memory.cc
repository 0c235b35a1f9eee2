// Linked into the programs that run Twice's CUDA host code on the replayed
// device (tests/cuda, tests/cuda_engine): they allocate their device memory
// through the runtime, so every pointer a kernel reads must be device or
// pinned memory, as on a device (replay_control.h). Their blocks' threads
// run in increasing order between barriers, or in decreasing order (blocks
// too) with TWICE_REPLAY_THREAD_ORDER=decreasing: ctest runs them both
// ways, so a read of another thread's write that lacks a barrier fails in
// one of the two.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/cuda_replay/replay_control.h"

namespace {

const bool kConfigured = [] {
  twice::cuda_replay::SetStrictDeviceMemory(true);
  const char* order = std::getenv("TWICE_REPLAY_THREAD_ORDER");
  if (order != nullptr && std::strcmp(order, "decreasing") == 0) {
    twice::cuda_replay::SetThreadOrder(
        twice::cuda_replay::ThreadOrder::kDecreasing);
  } else if (order != nullptr && std::strcmp(order, "increasing") != 0) {
    std::fprintf(stderr,
                 "TWICE_REPLAY_THREAD_ORDER must be increasing or "
                 "decreasing, got \"%s\"\n",
                 order);
    std::abort();
  }
  return true;
}();

}  // namespace
