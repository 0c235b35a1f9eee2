// The kernels' thread pool: every task runs exactly once for any task and
// thread count, nested and concurrent callers fall back to running inline
// (no deadlock, same results), resizing works between calls, and
// SetCpuThreads validates its argument.
#include "kernels/cpu/thread_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/threading.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::cpu {
namespace {

TEST(ThreadPoolTest, RunsEveryTaskOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](int64_t i) { hits[i].fetch_add(1); });
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n;
      }
    }
  }
}

TEST(ThreadPoolTest, ManyShortJobsBackToBack) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 2000; ++job) {
    pool.ParallelFor(5, [&](int64_t i) { sum.fetch_add(i + 1); });
  }
  EXPECT_EQ(sum.load(), 2000 * 15);
}

TEST(ThreadPoolTest, NestedParallelForRunsInline) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(8 * 8);
  pool.ParallelFor(8, [&](int64_t i) {
    pool.ParallelFor(8, [&](int64_t j) { hits[i * 8 + j].fetch_add(1); });
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPoolTest, ConcurrentCallersAllComplete) {
  ThreadPool pool(2);
  constexpr int kCallers = 4, kJobs = 200, kTasks = 16;
  std::vector<std::atomic<int64_t>> sums(kCallers);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int job = 0; job < kJobs; ++job) {
        pool.ParallelFor(kTasks, [&](int64_t i) { sums[c].fetch_add(i); });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (auto& s : sums) EXPECT_EQ(s.load(), kJobs * (kTasks * (kTasks - 1) / 2));
}

TEST(ThreadPoolTest, ResizeBetweenJobs) {
  ThreadPool pool(2);
  for (int threads : {4, 1, 3}) {
    pool.Resize(threads);
    EXPECT_EQ(pool.threads(), threads);
    std::atomic<int> count{0};
    pool.ParallelFor(100, [&](int64_t) { count.fetch_add(1); });
    EXPECT_EQ(count.load(), 100);
  }
}

TEST(ThreadPoolTest, ParallelForRangeCoversTheRangeOnce) {
  ASSERT_OK(SetCpuThreads(3));
  for (int64_t total : {0, 1, 5, 100, 1001}) {
    for (int64_t grain : {1, 7, 1000}) {
      std::vector<std::atomic<int>> hits(total);
      ParallelForRange(total, grain, [&](int64_t begin, int64_t end) {
        ASSERT_LT(begin, end);
        for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadingTest, SetCpuThreadsValidates) {
  EXPECT_EQ(SetCpuThreads(0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SetCpuThreads(257).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK(SetCpuThreads(3));
  EXPECT_EQ(CpuThreads(), 3);
  ASSERT_OK(SetCpuThreads(1));
  EXPECT_EQ(CpuThreads(), 1);
}

}  // namespace
}  // namespace twice::kernels::cpu
