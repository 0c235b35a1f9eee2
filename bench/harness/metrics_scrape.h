// Reads one value from a Twice server's Prometheus endpoint (GET /metrics
// over plain HTTP/1.0), so client-side tools can report server-side gauges
// such as process_resident_memory_bytes without a Prometheus server.
#ifndef TWICE_BENCH_HARNESS_METRICS_SCRAPE_H_
#define TWICE_BENCH_HARNESS_METRICS_SCRAPE_H_

#include <chrono>
#include <string>

#include "absl/status/statusor.h"

namespace twice::bench {

// The value of the first sample of `metric` (a name with no labels, e.g.
// "process_resident_memory_bytes") served at http://`address`/metrics
// (address: host:port, IPv4 or a name). UNAVAILABLE when the endpoint cannot
// be reached within `timeout`, NOT_FOUND when it does not export `metric`.
[[nodiscard]] absl::StatusOr<double> ScrapeMetric(
    const std::string& address, const std::string& metric,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_METRICS_SCRAPE_H_
