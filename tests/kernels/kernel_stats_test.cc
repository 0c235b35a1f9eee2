// The per-op counters every kernel backend keeps (kernels/kernel_stats.h):
// each op has its own name and counts, totals are the sum of the ops, and
// counting from many threads at once loses nothing.
#include "kernels/kernel_stats.h"

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace twice::kernels {
namespace {

TEST(KernelStatsTest, EveryOpHasItsOwnName) {
  std::set<std::string> names;
  for (int i = 0; i < kKernelOpCount; ++i) {
    const std::string name(KernelOpName(static_cast<KernelOp>(i)));
    EXPECT_NE(name, "unknown") << "op " << i;
    names.insert(name);
  }
  EXPECT_EQ(static_cast<int>(names.size()), kKernelOpCount);
}

TEST(KernelStatsTest, CountsAreKeptPerOpAndTotalled) {
  KernelStatsCounters counters;
  counters.Ran(KernelOp::kLinear);
  counters.Ran(KernelOp::kLinear);
  counters.Ran(KernelOp::kSsdChunkScan);
  counters.Declined(KernelOp::kWindowAttention);
  counters.CopiedToDevice(100);
  counters.CopiedToHost(30);
  counters.UploadedWeight(4096);
  const KernelBackendStats stats = counters.Snapshot();
  EXPECT_EQ(stats.op(KernelOp::kLinear).device_calls, 2);
  EXPECT_EQ(stats.op(KernelOp::kLinear).cpu_fallbacks, 0);
  EXPECT_EQ(stats.op(KernelOp::kSsdChunkScan).device_calls, 1);
  EXPECT_EQ(stats.op(KernelOp::kWindowAttention).device_calls, 0);
  EXPECT_EQ(stats.op(KernelOp::kWindowAttention).cpu_fallbacks, 1);
  EXPECT_EQ(stats.op(KernelOp::kRmsNorm).device_calls, 0);
  EXPECT_EQ(stats.device_calls, 3);
  EXPECT_EQ(stats.cpu_fallbacks, 1);
  EXPECT_EQ(stats.bytes_to_device, 100);
  EXPECT_EQ(stats.bytes_to_host, 30);
  EXPECT_EQ(stats.weight_bytes_to_device, 4096);
}

TEST(KernelStatsTest, ConcurrentCountsAreAllKept) {
  KernelStatsCounters counters;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&counters, t] {
      const auto op = static_cast<KernelOp>(t % kKernelOpCount);
      for (int i = 0; i < kPerThread; ++i) {
        counters.Ran(op);
        counters.CopiedToDevice(2);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const KernelBackendStats stats = counters.Snapshot();
  EXPECT_EQ(stats.device_calls, int64_t{kThreads} * kPerThread);
  EXPECT_EQ(stats.bytes_to_device, int64_t{kThreads} * kPerThread * 2);
  EXPECT_EQ(stats.op(static_cast<KernelOp>(0)).device_calls,
            int64_t{kPerThread});
}

}  // namespace
}  // namespace twice::kernels
