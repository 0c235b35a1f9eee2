#include "kernels/cpu/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "kernels/cpu/blas_threads.h"

namespace twice::kernels::cpu {
namespace {

// A ParallelFor issued from inside a task runs inline (see the header).
thread_local bool t_in_task = false;

// How long an idle worker polls for the next job before sleeping on the
// condition variable. Kernels of one layer follow each other within
// microseconds, and a futex wake-up costs about as much as a small kernel;
// a short poll keeps decode steps from paying it ~200 times per token while
// leaving the CPU to others once the engine goes quiet.
constexpr std::chrono::microseconds kSpin{50};

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  SetBlasSingleThreaded();
  StartWorkers(std::max(1, threads));
}

ThreadPool::~ThreadPool() { StopWorkers(); }

void ThreadPool::Resize(int threads) {
  std::lock_guard<std::mutex> run(run_mu_);
  StopWorkers();
  StartWorkers(std::max(1, threads));
}

void ThreadPool::StartWorkers(int threads) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  threads_.store(threads, std::memory_order_relaxed);
  workers_.reserve(threads - 1);
  for (int i = 1; i < threads; ++i)
    workers_.emplace_back([this] { WorkerLoop(); });
}

void ThreadPool::StopWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void ThreadPool::RunTasks(Job& job) {
  const bool was_in_task = t_in_task;
  t_in_task = true;
  for (int64_t i = job.next.fetch_add(1, std::memory_order_relaxed); i < job.n;
       i = job.next.fetch_add(1, std::memory_order_relaxed)) {
    job.fn(i);
  }
  t_in_task = was_in_task;
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = generation_.load(std::memory_order_acquire);
  for (;;) {
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0; generation_.load(std::memory_order_acquire) == seen; ++i) {
      CpuRelax();
      if ((i & 63) == 63 && std::chrono::steady_clock::now() > spin_until) {
        break;
      }
    }
    Job* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_cv_.wait(lock, [&] {
        return stop_ || generation_.load(std::memory_order_relaxed) != seen;
      });
      if (stop_) return;
      seen = generation_.load(std::memory_order_relaxed);
      job = job_;
      // The caller has already collected its job (it ran every task
      // itself); nothing to join.
      if (job == nullptr) continue;
      job->users.fetch_add(1, std::memory_order_relaxed);
    }
    RunTasks(*job);
    // The job lives on the caller's stack: after this decrement it may be
    // gone, so only the pool's own members are touched.
    if (job->users.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_all();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, absl::FunctionRef<void(int64_t)> fn) {
  if (n <= 0) return;
  if (n == 1 || t_in_task || threads() == 1 || !run_mu_.try_lock()) {
    const bool was_in_task = t_in_task;
    t_in_task = true;
    for (int64_t i = 0; i < n; ++i) fn(i);
    t_in_task = was_in_task;
    return;
  }
  std::lock_guard<std::mutex> run(run_mu_, std::adopt_lock);
  Job job{fn, n};
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &job;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_cv_.notify_all();
  RunTasks(job);
  // Every task is claimed; close the job to late workers and wait for the
  // ones still running a task: polling first, since the last task usually
  // ends within microseconds and a futex sleep and wake-up would add tens
  // of them to each of a decode step's ~100 products.
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = nullptr;
  }
  const auto spin_until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0; job.users.load(std::memory_order_acquire) != 0; ++i) {
    CpuRelax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > spin_until) {
      std::unique_lock<std::mutex> lock(mu_);
      done_cv_.wait(
          lock, [&] { return job.users.load(std::memory_order_acquire) == 0; });
      break;
    }
  }
}

ThreadPool& DefaultPool() {
  // Never destroyed: kernels may run from static destructors of other
  // libraries, and joining threads at exit buys nothing.
  static ThreadPool* pool = [] {
    int threads = 0;
    if (const char* env = std::getenv("TWICE_CPU_THREADS")) {
      threads = std::atoi(env);
    }
    if (threads <= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      threads = sched_getaffinity(0, sizeof(set), &set) == 0
                    ? CPU_COUNT(&set)
                    : static_cast<int>(std::thread::hardware_concurrency());
    }
    return new ThreadPool(std::clamp(threads, 1, 256));
  }();
  return *pool;
}

void ParallelForRange(int64_t total, int64_t grain,
                      absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (total <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int threads = DefaultPool().threads();
  const int64_t max_tasks = std::min<int64_t>(total / grain, 4 * threads);
  if (max_tasks <= 1 || threads == 1) {
    fn(0, total);
    return;
  }
  const int64_t step = (total + max_tasks - 1) / max_tasks;
  const int64_t tasks = (total + step - 1) / step;
  ParallelFor(tasks, [&](int64_t t) {
    const int64_t begin = t * step;
    fn(begin, std::min(total, begin + step));
  });
}

}  // namespace twice::kernels::cpu
