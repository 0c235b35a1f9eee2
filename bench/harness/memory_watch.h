// MemoryWatch: a load's view of server memory — the resident set
// (process_resident_memory_bytes) of each --metrics endpoint before the
// load, its peak while the load runs (a scrape of every endpoint every
// 500 ms on a thread of its own) and after it. An endpoint that cannot be
// read keeps -1 in that field.
#ifndef TWICE_BENCH_HARNESS_MEMORY_WATCH_H_
#define TWICE_BENCH_HARNESS_MEMORY_WATCH_H_

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/load_bench.h"

namespace twice::bench {

class MemoryWatch {
 public:
  // Reads the start values.
  explicit MemoryWatch(const std::vector<std::string>& endpoints);
  // Stops sampling if still running.
  ~MemoryWatch();
  MemoryWatch(const MemoryWatch&) = delete;
  MemoryWatch& operator=(const MemoryWatch&) = delete;

  // Samples peaks until StopSampling.
  void StartSampling();
  void StopSampling();
  // Reads the end values (they count towards the peak too).
  void ReadEnd();
  // One row per endpoint, in the order given.
  std::vector<LoadMemory> readings() const;

 private:
  void Sample();

  mutable std::mutex mu_;  // readings_
  std::vector<LoadMemory> readings_;
  std::atomic<bool> sampling_{false};
  std::thread sampler_;
};

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_MEMORY_WATCH_H_
