// The fiber scheduler of cuda_replay.h and the runtime calls the replayed
// launchers make.
#include "tests/cuda_replay/cuda_replay.h"

#include <ucontext.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace twice::cuda_replay {
namespace {

// Deep enough for a kernel's frames with whole wmma tiles in them (1 KiB
// each); the pages are touched only as used.
constexpr size_t kFiberStackBytes = 256 * 1024;

// A fiber's saved registers. On x86-64 a switch saves the callee-saved
// registers on the old stack and swaps stack pointers (swapcontext would
// also save the signal mask, a system call per switch, which made the
// replay spend half its time in the kernel); elsewhere ucontext.
#if defined(__x86_64__)
extern "C" void twice_replay_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .globl twice_replay_switch
  .type twice_replay_switch, @function
twice_replay_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size twice_replay_switch, .-twice_replay_switch
)");
struct Context {
  void* sp = nullptr;
};
void Switch(Context& from, Context& to) {
  twice_replay_switch(&from.sp, to.sp);
}
// The first switch to `c` "returns" into entry with the stack aligned as
// after a call.
void Prepare(Context& c, char* stack, size_t size, void (*entry)()) {
  auto top = reinterpret_cast<uintptr_t>(stack + size) & ~uintptr_t{15};
  auto* slot = reinterpret_cast<void**>(top);
  *--slot = nullptr;                              // entry never returns
  *--slot = reinterpret_cast<void*>(entry);       // popped by ret
  for (int r = 0; r < 6; ++r) *--slot = nullptr;  // rbp rbx r12-r15
  c.sp = slot;
}
#else
struct Context {
  ucontext_t uc;
};
void Switch(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
void Prepare(Context& c, char* stack, size_t size, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}
#endif

enum class Wait { kRunnable, kBlock, kWarp, kReturned };

struct Fiber {
  Context context;
  char* stack = nullptr;
  ThreadContext indices;
  int warp = 0;
  int lane = 0;
  Wait wait = Wait::kRunnable;
  uint32_t mask = 0;  // the lanes a kWarp wait is for
};

struct Grid {
  const std::function<void()>* body = nullptr;
  Context scheduler;
  std::vector<Fiber> fibers;
  Fiber* current = nullptr;
  int live = 0;      // fibers of the block that have not returned
  int at_block = 0;  // of them, waiting at __syncthreads
  std::vector<unsigned char> shared;  // 128 bytes more, to align
  unsigned char* shared_base = nullptr;
  std::vector<uint64_t> warp_slots;  // [warps][32]
};

Grid* g_grid = nullptr;
ThreadOrder g_order = ThreadOrder::kIncreasing;
int64_t g_launches = 0;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "cuda_replay: %s\n", what.c_str());
  std::abort();
}

Fiber& Me() {
  if (g_grid == nullptr || g_grid->current == nullptr) {
    Fail("a device function ran outside a kernel");
  }
  return *g_grid->current;
}

// The lanes of `mask` in `warp` that have not returned.
uint32_t LiveLanes(const Grid& grid, int warp, uint32_t mask) {
  uint32_t live = 0;
  for (int l = 0; l < 32; ++l) {
    const size_t t = static_cast<size_t>(warp) * 32 + l;
    if ((mask >> l & 1u) && t < grid.fibers.size() &&
        grid.fibers[t].wait != Wait::kReturned) {
      live |= 1u << l;
    }
  }
  return live;
}

// A warp wait completes when every live lane of its mask waits with the
// same mask; a block wait when every live thread of the block waits.
void ReleaseWarp(Grid& grid, int warp, uint32_t mask) {
  const uint32_t lanes = LiveLanes(grid, warp, mask);
  if (lanes == 0) return;
  for (int l = 0; l < 32; ++l) {
    if ((lanes >> l & 1u) == 0) continue;
    const Fiber& f = grid.fibers[static_cast<size_t>(warp) * 32 + l];
    if (f.wait != Wait::kWarp || f.mask != mask) return;
  }
  for (int l = 0; l < 32; ++l) {
    if (lanes >> l & 1u) {
      grid.fibers[static_cast<size_t>(warp) * 32 + l].wait = Wait::kRunnable;
    }
  }
}
void ReleaseBlock(Grid& grid) {
  if (grid.live == 0 || grid.at_block != grid.live) return;
  for (Fiber& f : grid.fibers) {
    if (f.wait == Wait::kBlock) f.wait = Wait::kRunnable;
  }
  grid.at_block = 0;
}

void WaitAt(Wait wait, uint32_t mask = 0) {
  Fiber& me = Me();
  Grid& grid = *g_grid;
  if (wait == Wait::kWarp && (mask >> me.lane & 1u) == 0) {
    Fail("a warp operation whose mask leaves out the calling lane");
  }
  me.wait = wait;
  me.mask = mask;
  if (wait == Wait::kBlock) {
    ++grid.at_block;
    ReleaseBlock(grid);
  } else {
    ReleaseWarp(grid, me.warp, mask);
  }
  // The last to arrive goes on at once; the others when the scheduler
  // comes to them.
  if (me.wait != Wait::kRunnable) Switch(me.context, grid.scheduler);
}

[[noreturn]] void FiberMain() {
  (*g_grid->body)();
  Grid& grid = *g_grid;
  Fiber& me = *grid.current;
  me.wait = Wait::kReturned;
  --grid.live;
  // Waits that counted this thread may be complete without it.
  ReleaseBlock(grid);
  for (int l = 0; l < 32; ++l) {
    const size_t t = static_cast<size_t>(me.warp) * 32 + l;
    if (t < grid.fibers.size() && grid.fibers[t].wait == Wait::kWarp) {
      ReleaseWarp(grid, me.warp, grid.fibers[t].mask);
    }
  }
  Switch(me.context, grid.scheduler);
  Fail("a returned thread ran again");
}

std::string Describe(const Grid& grid) {
  std::string out;
  for (const Fiber& f : grid.fibers) {
    if (f.wait == Wait::kReturned) continue;
    out += " t" + std::to_string(f.indices.thread_idx.x) +
           (f.wait == Wait::kBlock ? ":syncthreads" : ":warp");
    if (out.size() > 400) return out + " ...";
  }
  return out;
}

void RunBlock(Grid& grid) {
  const int n = static_cast<int>(grid.fibers.size());
  bool ran = true;
  while (ran) {
    ran = false;
    for (int k = 0; k < n; ++k) {
      Fiber& f =
          grid.fibers[g_order == ThreadOrder::kIncreasing ? k : n - 1 - k];
      if (f.wait != Wait::kRunnable) continue;
      grid.current = &f;
      Switch(grid.scheduler, f.context);
      grid.current = nullptr;
      ran = true;
    }
  }
  if (grid.live > 0) {
    const uint3 b = grid.fibers[0].indices.block_idx;
    Fail("block (" + std::to_string(b.x) + "," + std::to_string(b.y) + "," +
         std::to_string(b.z) + ") cannot pass its barriers:" + Describe(grid));
  }
}

}  // namespace

const ThreadContext& Current() { return Me().indices; }
int LaneId() { return Me().lane; }
void SyncThreads() { WaitAt(Wait::kBlock); }
void SyncWarp(uint32_t mask) { WaitAt(Wait::kWarp, mask); }

uint64_t ExchangeWithLane(uint64_t value, int src, uint32_t mask) {
  Fiber& me = Me();
  uint64_t* slots = &g_grid->warp_slots[static_cast<size_t>(me.warp) * 32];
  slots[me.lane] = value;
  WaitAt(Wait::kWarp, mask);
  const uint32_t lanes = LiveLanes(*g_grid, me.warp, mask);
  const bool valid = src >= 0 && src < 32 && (lanes >> src & 1u);
  const uint64_t result = valid ? slots[src] : value;
  WaitAt(Wait::kWarp, mask);  // every lane read before the slots are reused
  return result;
}

uint32_t ExchangeAll(uint64_t value, uint64_t values[32], uint32_t mask) {
  Fiber& me = Me();
  uint64_t* slots = &g_grid->warp_slots[static_cast<size_t>(me.warp) * 32];
  slots[me.lane] = value;
  WaitAt(Wait::kWarp, mask);
  const uint32_t lanes = LiveLanes(*g_grid, me.warp, mask);
  for (int l = 0; l < 32; ++l) values[l] = slots[l];
  WaitAt(Wait::kWarp, mask);
  return lanes;
}

void* DynamicSharedMemory() {
  Me();
  return g_grid->shared_base;
}

void Require(bool ok, const char* what) {
  if (!ok) Fail(what);
}

void SetThreadOrder(ThreadOrder order) { g_order = order; }
int64_t Launches() { return g_launches; }

void RunGrid(dim3 grid_dim, dim3 block_dim, size_t shared_bytes,
             const std::function<void()>& body) {
  if (g_grid != nullptr) Fail("a kernel launched from inside a kernel");
  const int threads = static_cast<int>(block_dim.x * block_dim.y * block_dim.z);
  if (threads <= 0 || threads > 1024) {
    Fail("a block of " + std::to_string(threads) + " threads");
  }
  if (grid_dim.x == 0 || grid_dim.y == 0 || grid_dim.z == 0 ||
      grid_dim.y > 65535 || grid_dim.z > 65535) {
    Fail("a grid of " + std::to_string(grid_dim.x) + " x " +
         std::to_string(grid_dim.y) + " x " + std::to_string(grid_dim.z) +
         " blocks");
  }
  ++g_launches;
  Grid grid;
  grid.body = &body;
  const int warps = (threads + 31) / 32;
  grid.warp_slots.assign(static_cast<size_t>(warps) * 32, 0);
  grid.fibers.resize(threads);
  // Stacks are kept from launch to launch: allocating (and faulting in)
  // 1024 of them per launch cost more than the kernels.
  static std::vector<std::unique_ptr<char[]>> stacks;
  while (stacks.size() < static_cast<size_t>(threads)) {
    stacks.push_back(std::make_unique_for_overwrite<char[]>(kFiberStackBytes));
  }
  for (int t = 0; t < threads; ++t) grid.fibers[t].stack = stacks[t].get();
  g_grid = &grid;
  for (unsigned bz = 0; bz < grid_dim.z; ++bz) {
    for (unsigned by = 0; by < grid_dim.y; ++by) {
      for (unsigned bx = 0; bx < grid_dim.x; ++bx) {
        grid.shared.assign(shared_bytes + 128, 0xFF);
        grid.shared_base =
            grid.shared.data() +
            (128 - reinterpret_cast<uintptr_t>(grid.shared.data()) % 128) % 128;
        grid.live = threads;
        grid.at_block = 0;
        for (int t = 0; t < threads; ++t) {
          Fiber& f = grid.fibers[t];
          f.indices.thread_idx = {
              static_cast<unsigned>(t) % block_dim.x,
              static_cast<unsigned>(t) / block_dim.x % block_dim.y,
              static_cast<unsigned>(t) / (block_dim.x * block_dim.y)};
          f.indices.block_idx = {bx, by, bz};
          f.indices.block_dim = block_dim;
          f.indices.grid_dim = grid_dim;
          f.warp = t / 32;
          f.lane = t % 32;
          f.wait = Wait::kRunnable;
          Prepare(f.context, f.stack, kFiberStackBytes, FiberMain);
        }
        RunBlock(grid);
      }
    }
  }
  g_grid = nullptr;
}

}  // namespace twice::cuda_replay

extern "C" {

cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int) {
  switch (attr) {
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = 227 * 1024;
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = 132;
      return cudaSuccess;
    default:
      return cudaErrorInvalidValue;
  }
}
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t) {
  std::memset(ptr, value, count);
  return cudaSuccess;
}

}  // extern "C"
