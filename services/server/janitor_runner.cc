#include "services/server/janitor_runner.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/common/log.h"
#include "services/server/server_store.h"
#include "services/store/store_metrics.h"
#if TWICE_HAVE_RADOS
#include "storage/rados/rados_janitor.h"
#endif

namespace twice::services {

#if TWICE_HAVE_RADOS

struct JanitorRunner::Impl {
  std::unique_ptr<storage::RadosJanitor> janitor;
  std::chrono::milliseconds poll{1000};
  std::chrono::seconds interval{60};
};

absl::StatusOr<std::unique_ptr<JanitorRunner>> JanitorRunner::Start(
    const ServerOptions& options) {
  const storage::RadosStoreOptions store = RadosStoreOptionsOf(options);
  storage::JanitorOptions janitor;
  janitor.lease = std::chrono::seconds(options.janitor_lease_seconds);
  janitor.grace = std::chrono::seconds(options.janitor_grace_seconds);
  janitor.state_budget_bytes = options.state_budget_bytes;
  janitor.verify = options.janitor_verify;
  absl::StatusOr<std::unique_ptr<storage::RadosJanitor>> opened =
      storage::RadosJanitor::Open(store, janitor);
  if (!opened.ok()) return opened.status();
  auto impl = std::make_unique<Impl>();
  impl->janitor = *std::move(opened);
  // A tenth of the lease: a standby takes over at most that long after the
  // lease of a dead janitor runs out, and the active one renews well
  // before it does.
  impl->poll = std::max(
      std::chrono::milliseconds(100),
      std::chrono::milliseconds(100 * int64_t{options.janitor_lease_seconds}));
  impl->interval = std::chrono::seconds(options.janitor_interval_seconds);
  std::unique_ptr<JanitorRunner> runner(new JanitorRunner(std::move(impl)));
  runner->thread_ = std::thread([r = runner.get()] { r->Loop(); });
  return runner;
}

void JanitorRunner::Loop() {
  using Clock = std::chrono::steady_clock;
  bool was_active = false;
  bool reported_standby = false;
  Clock::time_point next_pass = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    absl::StatusOr<bool> held = impl_->janitor->Acquire();
    if (!held.ok()) {
      Log(LogLevel::kWarning, "janitor.lease_error",
          LogValue(std::string(held.status().message())));
    } else if (!*held) {
      if (was_active || !reported_standby) {
        Log(LogLevel::kInfo, "janitor.waiting",
            "another janitor holds the lease");
        reported_standby = true;
      }
      was_active = false;
    } else {
      if (!was_active) {
        Log(LogLevel::kInfo, "janitor.active", "this janitor holds the lease");
        next_pass = Clock::now();
      }
      was_active = true;
      if (Clock::now() >= next_pass) {
        absl::StatusOr<storage::JanitorReport> report =
            impl_->janitor->RunPass();
        next_pass = Clock::now() + impl_->interval;
        if (!report.ok()) {
          counters_.failed_passes += 1;
          Log(LogLevel::kWarning, "janitor.pass_failed",
              LogValue(std::string(report.status().message())));
        } else {
          counters_.passes += 1;
          counters_.orphan_states += report->orphan_states;
          counters_.orphan_blocks += report->orphan_blocks;
          counters_.orphan_tokens += report->orphan_tokens;
          counters_.evicted_states += report->evicted_states;
          counters_.evicted_bytes += report->evicted_bytes;
          counters_.bad_values +=
              report->bad_states + report->bad_records + report->bad_tokens;
          counters_.state_bytes = report->state_bytes;
          counters_.documents = report->documents;
          Log(LogLevel::kInfo, "janitor.pass",
              absl::StrCat(
                  "tenants=", report->tenants, " documents=", report->documents,
                  " states=", report->states, " blocks=", report->blocks,
                  " state_bytes=", report->state_bytes,
                  " orphan_states=", report->orphan_states,
                  " orphan_blocks=", report->orphan_blocks,
                  " orphan_tokens=", report->orphan_tokens,
                  " evicted_states=", report->evicted_states, " evicted_bytes=",
                  report->evicted_bytes, " bad_states=", report->bad_states,
                  " bad_records=", report->bad_records,
                  " bad_tokens=", report->bad_tokens));
        }
      }
    }
    counters_.active = impl_->janitor->active() ? 1 : 0;
    lock.lock();
    wake_.wait_for(lock, impl_->poll, [this] { return stop_; });
  }
}

#else

struct JanitorRunner::Impl {};

absl::StatusOr<std::unique_ptr<JanitorRunner>> JanitorRunner::Start(
    const ServerOptions& options) {
  (void)options;
  return absl::FailedPreconditionError(
      "role janitor needs a build with librados (scripts/setup.sh --ceph, "
      "then rebuild)");
}

void JanitorRunner::Loop() {}

#endif

void JanitorRunner::AddMetrics(MetricsEndpoint& metrics) const {
  auto gauge = [&metrics](const char* name, const char* help,
                          const std::atomic<int64_t>& value) {
    metrics.AddGauge(name, help,
                     [&value] { return static_cast<double>(value.load()); });
  };
  gauge("twice_janitor_active", "1 while this janitor holds the lease",
        counters_.active);
  gauge("twice_janitor_passes_total", "Janitor passes completed",
        counters_.passes);
  gauge("twice_janitor_failed_passes_total",
        "Janitor passes that stopped on an error or a lost lease",
        counters_.failed_passes);
  gauge("twice_janitor_orphan_states_total", "States no record named, deleted",
        counters_.orphan_states);
  gauge("twice_janitor_orphan_blocks_total",
        "Blocks no manifest named, deleted", counters_.orphan_blocks);
  gauge("twice_janitor_orphan_tokens_total",
        "Tokens objects no record named, deleted", counters_.orphan_tokens);
  gauge("twice_janitor_evicted_states_total",
        "States evicted to keep the byte budget", counters_.evicted_states);
  gauge("twice_janitor_evicted_bytes_total",
        "Bytes evicted to keep the byte budget", counters_.evicted_bytes);
  gauge("twice_janitor_bad_values_total",
        "Values verify found bad (states deleted; records and tokens "
        "reported)",
        counters_.bad_values);
  gauge("twice_janitor_state_bytes",
        "Bytes of states and blocks after the last pass",
        counters_.state_bytes);
  gauge("twice_janitor_documents", "Documents the last pass saw",
        counters_.documents);
}

JanitorRunner::JanitorRunner(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

JanitorRunner::~JanitorRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace twice::services
