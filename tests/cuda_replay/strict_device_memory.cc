// Linked into the programs that run Twice's CUDA host code on the replayed
// device (tests/cuda, tests/cuda_engine): they allocate their device memory
// through the runtime, so every pointer a kernel reads must be device or
// pinned memory, as on a device (replay_control.h).
#include "tests/cuda_replay/replay_control.h"

namespace {

const bool kStrict = [] {
  twice::cuda_replay::SetStrictDeviceMemory(true);
  return true;
}();

}  // namespace
