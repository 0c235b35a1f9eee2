#include "bench/harness/memory_watch.h"

#include <algorithm>
#include <chrono>

#include "absl/status/statusor.h"
#include "bench/harness/metrics_scrape.h"

namespace twice::bench {
namespace {

constexpr char kMemoryMetric[] = "process_resident_memory_bytes";

}  // namespace

MemoryWatch::MemoryWatch(const std::vector<std::string>& endpoints) {
  for (const std::string& endpoint : endpoints) {
    LoadMemory m;
    m.endpoint = endpoint;
    absl::StatusOr<double> rss = ScrapeMetric(endpoint, kMemoryMetric);
    if (rss.ok()) m.start_bytes = m.peak_bytes = *rss;
    readings_.push_back(m);
  }
}

MemoryWatch::~MemoryWatch() { StopSampling(); }

void MemoryWatch::StartSampling() {
  if (sampling_.exchange(true)) return;
  sampler_ = std::thread([this] { Sample(); });
}

void MemoryWatch::StopSampling() {
  sampling_ = false;
  if (sampler_.joinable()) sampler_.join();
}

void MemoryWatch::ReadEnd() {
  std::lock_guard<std::mutex> lock(mu_);
  for (LoadMemory& m : readings_) {
    absl::StatusOr<double> rss = ScrapeMetric(m.endpoint, kMemoryMetric);
    if (rss.ok()) {
      m.end_bytes = *rss;
      m.peak_bytes = std::max(m.peak_bytes, *rss);
    }
  }
}

std::vector<LoadMemory> MemoryWatch::readings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return readings_;
}

void MemoryWatch::Sample() {
  while (sampling_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (LoadMemory& m : readings_) {
        absl::StatusOr<double> rss = ScrapeMetric(m.endpoint, kMemoryMetric);
        if (rss.ok()) m.peak_bytes = std::max(m.peak_bytes, *rss);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace twice::bench
