// EndpointPool: the replicas of one internal service (prefill or decode)
// that the orchestrator spreads its calls over.
//
// Choice: the endpoint with the fewest calls in flight from this process
// (least loaded), ties broken round-robin; an endpoint that recently failed
// with UNAVAILABLE is avoided for `cooldown` unless every endpoint has.
// Retry policy (RunWithRetry): a call that fails with UNAVAILABLE — the
// endpoint is down, unreachable or restarting — is run again on another
// endpoint, each endpoint at most once per call. Everything else (bad
// arguments, NOT_FOUND, the caller's own cancellation or deadline) is the
// answer and is returned as is. Calls must be idempotent to be retried:
// prefill is (content-addressed chain keys: a retried ingest reuses the
// segments the failed endpoint stored), and a generation is retried only
// before its first token reached the caller.
//
// Thread-safe; the endpoint list is fixed at construction.
#ifndef TWICE_SERVICES_ORCHESTRATOR_ENDPOINT_POOL_H_
#define TWICE_SERVICES_ORCHESTRATOR_ENDPOINT_POOL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "services/common/log.h"

namespace twice::services {

template <typename Stub>
struct Endpoint {
  std::string address;  // for logs and errors ("in-process" in role all)
  std::shared_ptr<Stub> stub;
};

template <typename Stub>
class EndpointPool {
 public:
  using Clock = std::chrono::steady_clock;

  explicit EndpointPool(std::vector<Endpoint<Stub>> endpoints,
                        Clock::duration cooldown = std::chrono::seconds(5))
      : endpoints_(std::move(endpoints)),
        state_(endpoints_.size()),
        cooldown_(cooldown) {}

  size_t size() const { return endpoints_.size(); }
  const std::string& address(size_t i) const { return endpoints_[i].address; }

  // The endpoint a new call should go to, skipping `tried` (indices); or
  // nullopt when every endpoint has been tried. `preferred`, when given and
  // not tried nor cooling down, wins (it keeps one batch's questions on one
  // decode endpoint, where they share a state load and decode steps).
  std::optional<size_t> Pick(const std::vector<size_t>& tried,
                             std::optional<size_t> preferred = std::nullopt) {
    const int64_t now = Now();
    auto usable = [&](size_t i) {
      for (size_t t : tried) {
        if (t == i) return false;
      }
      return true;
    };
    if (preferred && *preferred < size() && usable(*preferred) &&
        state_[*preferred].failed_until.load() <= now) {
      return preferred;
    }
    const size_t start = next_.fetch_add(1) % std::max<size_t>(size(), 1);
    std::optional<size_t> best;
    int best_load = std::numeric_limits<int>::max();
    bool best_cooling = true;
    for (size_t k = 0; k < size(); ++k) {
      const size_t i = (start + k) % size();
      if (!usable(i)) continue;
      const bool cooling = state_[i].failed_until.load() > now;
      const int load = state_[i].in_flight.load();
      if (!best || (best_cooling && !cooling) ||
          (best_cooling == cooling && load < best_load)) {
        best = i;
        best_load = load;
        best_cooling = cooling;
      }
    }
    return best;
  }

  // Runs `attempt(stub, committed)` on picked endpoints under the retry
  // policy above. `attempt` sets `committed` once the call has had effects
  // that a retry would repeat (a token streamed to the public caller); a
  // committed call is never retried.
  template <typename T>
  absl::StatusOr<T> RunWithRetry(
      const char* what,
      const std::function<absl::StatusOr<T>(Stub&, bool& committed)>& attempt,
      std::optional<size_t> preferred = std::nullopt) {
    std::vector<size_t> tried;
    absl::Status last = absl::UnavailableError(
        absl::StrCat("no ", what, " endpoint is configured"));
    while (std::optional<size_t> i = Pick(tried, preferred)) {
      tried.push_back(*i);
      bool committed = false;
      state_[*i].in_flight.fetch_add(1);
      absl::StatusOr<T> result = attempt(*endpoints_[*i].stub, committed);
      state_[*i].in_flight.fetch_sub(1);
      if (result.ok() ||
          result.status().code() != absl::StatusCode::kUnavailable) {
        return result;
      }
      state_[*i].failed_until.store(Now() + CooldownMs());
      last = absl::UnavailableError(
          absl::StrCat(what, " endpoint ", endpoints_[*i].address,
                       " failed: ", result.status().message()));
      if (committed) return last;
      Log(LogLevel::kWarning, "endpoint.failed",
          absl::StrCat(
              "service=", what, " address=", endpoints_[*i].address,
              " reason=", LogValue(std::string(result.status().message())),
              " retry=", tried.size() < size()));
    }
    return last;
  }

 private:
  struct State {
    std::atomic<int> in_flight{0};
    std::atomic<int64_t> failed_until{0};  // steady-clock ms
  };

  static int64_t Now() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               Clock::now().time_since_epoch())
        .count();
  }
  int64_t CooldownMs() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(cooldown_)
        .count();
  }

  const std::vector<Endpoint<Stub>> endpoints_;
  std::vector<State> state_;
  const Clock::duration cooldown_;
  std::atomic<size_t> next_{0};
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_ENDPOINT_POOL_H_
