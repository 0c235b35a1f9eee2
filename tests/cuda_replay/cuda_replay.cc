// The fiber scheduler of cuda_replay.h and the runtime calls the replayed
// launchers make.
#include "tests/cuda_replay/cuda_replay.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"

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
  .pushsection .text
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
  .popsection
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
  uint32_t mask = 0;          // the lanes a kWarp wait is for
  std::source_location site;  // where the source waits
};

// Dynamic shared memory that ends at an inaccessible page.
class GuardedShared {
 public:
  explicit GuardedShared(size_t bytes) : bytes_(bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t usable = (bytes + 128 + page - 1) / page * page;
    mapped_ = usable + page;
    void* base = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) std::abort();
    base_ = static_cast<unsigned char*>(base);
    mprotect(base_ + usable, page, PROT_NONE);
    // The block's bytes end at the guard, rounded down to 128-byte
    // alignment (at most 127 bytes of slack past the request).
    const uintptr_t end = reinterpret_cast<uintptr_t>(base_ + usable);
    data_ = reinterpret_cast<unsigned char*>((end - bytes) & ~uintptr_t{127});
  }
  ~GuardedShared() { munmap(base_, mapped_); }
  GuardedShared(const GuardedShared&) = delete;
  GuardedShared& operator=(const GuardedShared&) = delete;
  void Fill() { std::memset(data_, 0xFF, bytes_); }
  unsigned char* data() { return data_; }

 private:
  size_t bytes_;
  size_t mapped_ = 0;
  unsigned char* base_ = nullptr;
  unsigned char* data_ = nullptr;
};

struct Grid {
  const std::function<void()>* body = nullptr;
  Context scheduler;
  std::vector<Fiber> fibers;
  Fiber* current = nullptr;
  int live = 0;           // fibers of the block that have not returned
  int at_block = 0;       // of them, waiting at __syncthreads
  uint64_t releases = 0;  // barriers completed, to restart the order
  std::unique_ptr<GuardedShared> shared;
  std::vector<uint64_t> warp_slots;  // [warps][32]
};

Grid* g_grid = nullptr;
ThreadOrder g_order = ThreadOrder::kIncreasing;
int64_t g_launches = 0;
int g_shared_optin = 227 * 1024;
uint64_t g_block_serial = 0;  // blocks run since the program started
// The block serial each static __shared__ variable was last filled in.
std::map<const void*, uint64_t>& FilledShared() {
  static auto* filled = new std::map<const void*, uint64_t>;
  return *filled;
}
std::map<const void*, int>& DynamicSharedLimits() {
  static auto* limits = new std::map<const void*, int>;
  return *limits;
}
constexpr size_t kDefaultDynamicShared = 48 * 1024;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "cuda_replay: %s\n", what.c_str());
  std::abort();
}

std::string Where(const std::source_location& site) {
  return absl::StrCat(site.file_name(), ":", site.line());
}

bool SameSite(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         std::string_view(a.file_name()) == b.file_name();
}

std::string Thread(const Fiber& f) {
  const uint3 t = f.indices.thread_idx;
  return absl::StrCat("thread (", t.x, ",", t.y, ",", t.z, ")");
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
// same mask; they must have come from the same place.
void ReleaseWarp(Grid& grid, int warp, uint32_t mask) {
  const uint32_t lanes = LiveLanes(grid, warp, mask);
  if (lanes == 0) return;
  const Fiber* first = nullptr;
  for (int l = 0; l < 32; ++l) {
    if ((lanes >> l & 1u) == 0) continue;
    const Fiber& f = grid.fibers[static_cast<size_t>(warp) * 32 + l];
    if (f.wait != Wait::kWarp || f.mask != mask) return;
    if (first == nullptr) {
      first = &f;
    } else if (!SameSite(f.site, first->site)) {
      Fail(absl::StrCat("a warp operation with one mask reached at ",
                        Where(first->site), " by ", Thread(*first), " and at ",
                        Where(f.site), " by ", Thread(f)));
    }
  }
  for (int l = 0; l < 32; ++l) {
    if (lanes >> l & 1u) {
      grid.fibers[static_cast<size_t>(warp) * 32 + l].wait = Wait::kRunnable;
    }
  }
  ++grid.releases;
}

// A block wait completes when every live thread waits at __syncthreads,
// all at the same place.
void ReleaseBlock(Grid& grid) {
  if (grid.live == 0 || grid.at_block != grid.live) return;
  const Fiber* first = nullptr;
  for (Fiber& f : grid.fibers) {
    if (f.wait != Wait::kBlock) continue;
    if (first == nullptr) {
      first = &f;
    } else if (!SameSite(f.site, first->site)) {
      Fail(absl::StrCat("__syncthreads reached at ", Where(first->site), " by ",
                        Thread(*first), " and at ", Where(f.site), " by ",
                        Thread(f)));
    }
  }
  for (Fiber& f : grid.fibers) {
    if (f.wait == Wait::kBlock) f.wait = Wait::kRunnable;
  }
  grid.at_block = 0;
  ++grid.releases;
}

void WaitAt(Wait wait, uint32_t mask, const std::source_location& site) {
  Fiber& me = Me();
  Grid& grid = *g_grid;
  if (wait == Wait::kWarp && (mask >> me.lane & 1u) == 0) {
    Fail(absl::StrCat("a warp operation at ", Where(site),
                      " whose mask leaves out the calling lane"));
  }
  me.wait = wait;
  me.mask = mask;
  me.site = site;
  if (wait == Wait::kBlock) {
    ++grid.at_block;
    ReleaseBlock(grid);
  } else {
    ReleaseWarp(grid, me.warp, mask);
  }
  // Always back to the scheduler, which runs the released threads in the
  // block's order from the first.
  Switch(me.context, grid.scheduler);
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
    absl::StrAppend(
        &out, " ", Thread(f),
        f.wait == Wait::kBlock ? " at __syncthreads " : " at a warp op ",
        Where(f.site), ";");
    if (out.size() > 600) return absl::StrCat(out, " ...");
  }
  return out;
}

// Runs the block's threads one by one in the set order; whenever a barrier
// completes, from the first again, so every phase between barriers runs in
// that order.
void RunBlock(Grid& grid) {
  const int n = static_cast<int>(grid.fibers.size());
  bool ran = true;
  while (ran) {
    ran = false;
    const uint64_t releases = grid.releases;
    for (int k = 0; k < n && grid.releases == releases; ++k) {
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
    Fail(absl::StrCat("block (", b.x, ",", b.y, ",", b.z,
                      ") cannot pass its barriers:", Describe(grid)));
  }
}

}  // namespace

const ThreadContext& Current() { return Me().indices; }
int LaneId() { return Me().lane; }
void SyncThreads(const std::source_location& site) {
  WaitAt(Wait::kBlock, 0, site);
}
void SyncWarp(uint32_t mask, const std::source_location& site) {
  WaitAt(Wait::kWarp, mask, site);
}

uint64_t ExchangeWithLane(uint64_t value, int src, uint32_t mask,
                          const std::source_location& site) {
  Fiber& me = Me();
  uint64_t* slots = &g_grid->warp_slots[static_cast<size_t>(me.warp) * 32];
  slots[me.lane] = value;
  WaitAt(Wait::kWarp, mask, site);
  const uint32_t lanes = LiveLanes(*g_grid, me.warp, mask);
  if (src != me.lane && (src < 0 || src >= 32 || (lanes >> src & 1u) == 0)) {
    Fail(absl::StrCat("a shuffle at ", Where(site), " by ", Thread(me),
                      " reads lane ", src, ", not a live lane of its mask"));
  }
  const uint64_t result = slots[src];
  WaitAt(Wait::kWarp, mask, site);  // every lane read before slots are reused
  return result;
}

uint32_t ExchangeAll(uint64_t value, uint64_t values[32], uint32_t mask,
                     const std::source_location& site) {
  Fiber& me = Me();
  uint64_t* slots = &g_grid->warp_slots[static_cast<size_t>(me.warp) * 32];
  slots[me.lane] = value;
  WaitAt(Wait::kWarp, mask, site);
  const uint32_t lanes = LiveLanes(*g_grid, me.warp, mask);
  for (int l = 0; l < 32; ++l) values[l] = slots[l];
  WaitAt(Wait::kWarp, mask, site);
  return lanes;
}

void* DynamicSharedMemory() {
  Me();
  return g_grid->shared->data();
}

void FillShared(void* address, size_t bytes) {
  Me();
  uint64_t& filled = FilledShared()[address];
  if (filled == g_block_serial) return;
  std::memset(address, 0xFF, bytes);
  filled = g_block_serial;
}

void SetDynamicSharedLimit(const void* kernel, int bytes) {
  DynamicSharedLimits()[kernel] = bytes;
}

void Require(bool ok, const char* what) {
  if (!ok) Fail(what);
}

void SetThreadOrder(ThreadOrder order) { g_order = order; }
void SetSharedMemoryOptin(int bytes) { g_shared_optin = bytes; }
int SharedMemoryOptin() { return g_shared_optin; }
int64_t Launches() { return g_launches; }

void RunGrid(const void* kernel, dim3 grid_dim, dim3 block_dim,
             size_t shared_bytes, const std::function<void()>& body) {
  // Host threads launch concurrently (the CUDA backend's lanes): their
  // grids run one at a time, as the scheduler's state is one.
  thread_local bool in_grid = false;
  if (in_grid) Fail("a kernel launched from inside a kernel");
  static std::mutex grids;
  std::lock_guard<std::mutex> lock(grids);
  in_grid = true;
  const int threads = static_cast<int>(block_dim.x * block_dim.y * block_dim.z);
  if (threads <= 0 || threads > 1024 || block_dim.x > 1024 ||
      block_dim.y > 1024 || block_dim.z > 64) {
    Fail(absl::StrCat("a block of ", block_dim.x, " x ", block_dim.y, " x ",
                      block_dim.z, " threads"));
  }
  if (grid_dim.x == 0 || grid_dim.y == 0 || grid_dim.z == 0 ||
      grid_dim.y > 65535 || grid_dim.z > 65535) {
    Fail(absl::StrCat("a grid of ", grid_dim.x, " x ", grid_dim.y, " x ",
                      grid_dim.z, " blocks"));
  }
  if (shared_bytes > kDefaultDynamicShared) {
    const auto limit = DynamicSharedLimits().find(kernel);
    if (limit == DynamicSharedLimits().end() ||
        static_cast<size_t>(limit->second) < shared_bytes) {
      Fail(absl::StrCat(
          "a launch asks for ", shared_bytes,
          " bytes of dynamic shared memory, over the kernel's limit (48 KiB "
          "unless cudaFuncSetAttribute raised it)"));
    }
  }
  ++g_launches;
  Grid grid;
  grid.body = &body;
  const int warps = (threads + 31) / 32;
  grid.warp_slots.assign(static_cast<size_t>(warps) * 32, 0);
  grid.fibers.resize(threads);
  grid.shared = std::make_unique<GuardedShared>(shared_bytes);
  // Stacks are kept from launch to launch: allocating (and faulting in)
  // 1024 of them per launch cost more than the kernels.
  static std::vector<std::unique_ptr<char[]>> stacks;
  while (stacks.size() < static_cast<size_t>(threads)) {
    stacks.push_back(std::make_unique_for_overwrite<char[]>(kFiberStackBytes));
  }
  for (int t = 0; t < threads; ++t) grid.fibers[t].stack = stacks[t].get();
  g_grid = &grid;
  const uint64_t blocks = uint64_t{grid_dim.x} * grid_dim.y * grid_dim.z;
  for (uint64_t i = 0; i < blocks; ++i) {
    // Decreasing order runs the blocks last to first too.
    const uint64_t b = g_order == ThreadOrder::kIncreasing ? i : blocks - 1 - i;
    const uint3 block_idx = {
        static_cast<unsigned>(b % grid_dim.x),
        static_cast<unsigned>(b / grid_dim.x % grid_dim.y),
        static_cast<unsigned>(b / (uint64_t{grid_dim.x} * grid_dim.y))};
    ++g_block_serial;
    grid.shared->Fill();
    grid.live = threads;
    grid.at_block = 0;
    for (int t = 0; t < threads; ++t) {
      Fiber& f = grid.fibers[t];
      f.indices.thread_idx = {
          static_cast<unsigned>(t) % block_dim.x,
          static_cast<unsigned>(t) / block_dim.x % block_dim.y,
          static_cast<unsigned>(t) / (block_dim.x * block_dim.y)};
      f.indices.block_idx = block_idx;
      f.indices.block_dim = block_dim;
      f.indices.grid_dim = grid_dim;
      f.warp = t / 32;
      f.lane = t % 32;
      f.wait = Wait::kRunnable;
      Prepare(f.context, f.stack, kFiberStackBytes, FiberMain);
    }
    RunBlock(grid);
  }
  g_grid = nullptr;
  in_grid = false;
}

}  // namespace twice::cuda_replay
