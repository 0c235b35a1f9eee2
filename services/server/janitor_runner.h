// JanitorRunner: the loop of --role=janitor. It keeps trying for the
// janitor's lease (storage/rados/rados_janitor.h), renews it while held,
// runs a pass every interval, and counts what the passes do for the
// metrics endpoint. A standby process polls often enough to take over
// within a fraction of the lease after the active one dies.
#ifndef TWICE_SERVICES_SERVER_JANITOR_RUNNER_H_
#define TWICE_SERVICES_SERVER_JANITOR_RUNNER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/statusor.h"
#include "services/server/server_options.h"

namespace twice::services {

class MetricsEndpoint;  // services/store/store_metrics.h

// Totals since the process started.
struct JanitorCounters {
  std::atomic<int64_t> active{0};  // 1 while this process holds the lease
  std::atomic<int64_t> passes{0};
  std::atomic<int64_t> failed_passes{0};
  std::atomic<int64_t> orphan_states{0};
  std::atomic<int64_t> orphan_blocks{0};
  std::atomic<int64_t> orphan_tokens{0};
  std::atomic<int64_t> evicted_states{0};
  std::atomic<int64_t> evicted_bytes{0};
  std::atomic<int64_t> bad_values{0};
  std::atomic<int64_t> state_bytes{0};  // after the last pass
  std::atomic<int64_t> documents{0};    // seen by the last pass
};

class JanitorRunner {
 public:
  // Connects to the store of `options` (--store=rados) and starts the
  // loop. FAILED_PRECONDITION in a build without librados.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JanitorRunner>> Start(
      const ServerOptions& options);
  // Stops the loop and releases the lease.
  ~JanitorRunner();

  const JanitorCounters& counters() const { return counters_; }
  // Exposes the counters as twice_janitor_* gauges of `metrics`, which
  // must not outlive this runner.
  void AddMetrics(MetricsEndpoint& metrics) const;

 private:
  struct Impl;
  explicit JanitorRunner(std::unique_ptr<Impl> impl);
  void Loop();

  std::unique_ptr<Impl> impl_;
  JanitorCounters counters_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_SERVER_JANITOR_RUNNER_H_
