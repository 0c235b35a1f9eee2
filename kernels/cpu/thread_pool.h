// ThreadPool: the worker threads the CPU kernels split their loops over.
// Internal to twice_kernels; kernels/threading.h is the public knob.
//
// A pool of `threads` runs threads - 1 long-lived workers plus the calling
// thread. ParallelFor(n, fn) hands out task indices 0..n-1 dynamically (an
// atomic counter), so a worker the OS has descheduled on a busy machine
// simply takes fewer tasks; the caller returns once every task has finished.
// No thread is created per call and nothing is allocated per call.
//
// Concurrency: one ParallelFor runs on the pool at a time. A second caller
// that finds the pool busy, and any ParallelFor issued from inside a task,
// runs its tasks inline on its own thread instead of waiting, so concurrent
// engine threads never deadlock and never oversubscribe the CPUs.
//
// BLAS: the kernels call BLAS from inside tasks, so BLAS itself must run one
// thread per call; the first pool made sets that (blas_threads.h).
#ifndef TWICE_KERNELS_CPU_THREAD_POOL_H_
#define TWICE_KERNELS_CPU_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace twice::kernels::cpu {

class ThreadPool {
 public:
  // threads >= 1 (clamped).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return threads_.load(std::memory_order_relaxed); }

  // Restarts the workers for a new thread count; waits for a running
  // ParallelFor to finish first.
  void Resize(int threads);

  // Runs fn(i) for every i in [0, n), on the workers and the caller.
  void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t)> fn);

 private:
  struct Job {
    absl::FunctionRef<void(int64_t)> fn;
    int64_t n;
    std::atomic<int64_t> next{0};
    // Workers inside RunTasks: raised under mu_ while the job is open,
    // lowered without it (the caller polls it before it sleeps).
    std::atomic<int> users{0};
  };

  static void RunTasks(Job& job);
  void StartWorkers(int threads);
  void StopWorkers();
  void WorkerLoop();

  std::atomic<int> threads_{1};
  std::mutex run_mu_;  // held by the ParallelFor that owns the workers
  std::mutex mu_;
  std::condition_variable wake_cv_;
  std::condition_variable done_cv_;
  std::atomic<uint64_t> generation_{0};  // bumped (under mu_) per job
  Job* job_ = nullptr;                   // guarded by mu_
  bool stop_ = false;                    // guarded by mu_
  std::vector<std::thread> workers_;
};

// The process-wide pool the kernels use, sized by kernels::SetCpuThreads
// (default: the CPUs this process may run on, or TWICE_CPU_THREADS).
ThreadPool& DefaultPool();

// ParallelFor on DefaultPool().
inline void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t)> fn) {
  DefaultPool().ParallelFor(n, fn);
}

// Splits [0, total) into contiguous ranges of at least `grain` elements
// (about four per thread, for balance on a shared machine) and runs
// fn(begin, end) for each; a problem below two grains runs inline.
void ParallelForRange(int64_t total, int64_t grain,
                      absl::FunctionRef<void(int64_t, int64_t)> fn);

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_THREAD_POOL_H_
