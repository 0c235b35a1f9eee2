#include "services/store/store_metrics.h"

#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "services/common/metrics_http_server.h"

namespace twice::services {
namespace {

prometheus::MetricFamily Family(std::string name, std::string help,
                                prometheus::MetricType type, double value) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
  return family;
}

// Counts a call, times it from arrival to its status, and keeps it in the
// in-flight gauge meanwhile (the interceptor lives as long as the call).
class CountingInterceptor : public grpc::experimental::Interceptor {
 public:
  CountingInterceptor(MetricsEndpoint* metrics, const char* method)
      : metrics_(metrics),
        method_(method != nullptr ? method : ""),
        started_(std::chrono::steady_clock::now()) {
    metrics_->AddInFlight(method_, 1);
  }
  ~CountingInterceptor() override {
    if (in_flight_) metrics_->AddInFlight(method_, -1);
  }

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const double seconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - started_)
                                 .count();
      metrics_->FinishRequest(method_, methods->GetSendStatus().error_code(),
                              seconds);
      if (in_flight_) metrics_->AddInFlight(method_, -1);
      in_flight_ = false;
    }
    methods->Proceed();
  }

 private:
  MetricsEndpoint* metrics_;
  std::string method_;
  std::chrono::steady_clock::time_point started_;
  bool in_flight_ = true;
};

// Latency buckets (seconds) for calls and time to first token: 1 ms to 2 min.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
      0.5,   1,      2.5,   5,    10,    30,   60,  120};
  return buckets;
}

// Tokens per second of one call: 1 to 1M.
const prometheus::Histogram::BucketBoundaries& RateBuckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {
      1, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000, 1000000};
  return buckets;
}

}  // namespace

ServingMetrics& ServingMetrics::Process() {
  static ServingMetrics* metrics = new ServingMetrics();
  return *metrics;
}

ServingMetrics::ServingMetrics()
    : registry_(std::make_shared<prometheus::Registry>()) {
  auto histogram = [&](const char* name, const char* help,
                       const prometheus::Histogram::BucketBoundaries& b) {
    return &prometheus::BuildHistogram()
                .Name(name)
                .Help(help)
                .Register(*registry_)
                .Add({}, b);
  };
  auto counter = [&](const char* name, const char* help) {
    return &prometheus::BuildCounter()
                .Name(name)
                .Help(help)
                .Register(*registry_)
                .Add({});
  };
  ask_ttft_ =
      histogram("twice_ask_ttft_seconds",
                "Time from an Ask call to its first token", LatencyBuckets());
  decode_ttft_ = histogram("twice_decode_ttft_seconds",
                           "Time from a Generate call to its first token",
                           LatencyBuckets());
  prefilled_ = counter("twice_prefill_tokens_total",
                       "Tokens read into states by the prefill service");
  decoded_ = counter("twice_decode_tokens_total",
                     "Tokens sampled by the decode service");
  decode_read_ =
      counter("twice_decode_read_tokens_total",
              "Tokens the decode service read before sampling (second reads, "
              "as-of tails, prompts)");
  prefill_rate_ =
      histogram("twice_prefill_tokens_per_second",
                "Prefill throughput of each Prefill call", RateBuckets());
  decode_rate_ =
      histogram("twice_decode_tokens_per_second",
                "Decode throughput of each Generate call", RateBuckets());
  reused_ = counter("twice_states_reused_total",
                    "Stored states that answers and ingests reused");
  recomputed_ = counter("twice_states_recomputed_total",
                        "States recomputed from tokens after a miss");
  prometheus::Family<prometheus::Counter>& cached_record_asks =
      prometheus::BuildCounter()
          .Name("twice_ask_cached_records_total")
          .Help(
              "Asks started from a cached document record, by what the "
              "record read found (watched: no read, the store's watch "
              "showed the record unchanged)")
          .Register(*registry_);
  cached_record_confirmed_ =
      &cached_record_asks.Add({{"outcome", "confirmed"}});
  cached_record_changed_ = &cached_record_asks.Add({{"outcome", "changed"}});
  cached_record_watched_ = &cached_record_asks.Add({{"outcome", "watched"}});
}

void ServingMetrics::ObserveAskTtft(double seconds) {
  ask_ttft_->Observe(seconds);
}
void ServingMetrics::ObserveDecodeTtft(double seconds) {
  decode_ttft_->Observe(seconds);
}
void ServingMetrics::AddPrefilledTokens(int64_t tokens,
                                        double tokens_per_second) {
  if (tokens <= 0) return;
  prefilled_->Increment(static_cast<double>(tokens));
  if (tokens_per_second > 0) prefill_rate_->Observe(tokens_per_second);
}
void ServingMetrics::AddDecodedTokens(int64_t tokens,
                                      double tokens_per_second) {
  if (tokens <= 0) return;
  decoded_->Increment(static_cast<double>(tokens));
  if (tokens_per_second > 0) decode_rate_->Observe(tokens_per_second);
}
void ServingMetrics::AddDecodeReadTokens(int64_t tokens) {
  if (tokens > 0) decode_read_->Increment(static_cast<double>(tokens));
}
void ServingMetrics::AddStatesReused(int64_t n) {
  if (n > 0) reused_->Increment(static_cast<double>(n));
}
void ServingMetrics::AddStatesRecomputed(int64_t n) {
  if (n > 0) recomputed_->Increment(static_cast<double>(n));
}
void ServingMetrics::AddCachedRecordAsk(bool confirmed) {
  (confirmed ? cached_record_confirmed_ : cached_record_changed_)->Increment();
}

void ServingMetrics::AddWatchedRecordAsk() {
  cached_record_watched_->Increment();
}

namespace {

class CountingInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CountingInterceptorFactory(MetricsEndpoint* metrics)
      : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new CountingInterceptor(metrics_, info->method());
  }

 private:
  MetricsEndpoint* metrics_;
};

}  // namespace

// Gauges read through callbacks at each scrape (decode queue depths).
class GaugeCollector : public prometheus::Collectable {
 public:
  struct Gauge {
    std::string name;
    std::string help;
    std::function<double()> read;
  };
  void Add(Gauge gauge) {
    std::lock_guard<std::mutex> lock(mu_);
    gauges_.push_back(std::move(gauge));
  }
  std::vector<prometheus::MetricFamily> Collect() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<prometheus::MetricFamily> families;
    for (const Gauge& g : gauges_) {
      families.push_back(
          Family(g.name, g.help, prometheus::MetricType::Gauge, g.read()));
    }
    return families;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Gauge> gauges_;
};

// The store's counters as Prometheus families, read at each scrape so the
// numbers are never stale and nothing is copied in between.
class StoreCollector : public prometheus::Collectable {
 public:
  explicit StoreCollector(storage::Store* store) : store_(store) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    using prometheus::MetricType;
    // Read on a thread of our own: the HTTP server's workers have small
    // stacks, and Stats of a remote store is a gRPC call whose
    // name resolution and channel setup run deep enough on the calling
    // thread to overflow them.
    storage::StoreStats s;
    std::thread reader([&] { s = store_->Stats(); });
    reader.join();
    const auto d = [](int64_t v) { return static_cast<double>(v); };
    return {
        Family("twice_store_state_bytes",
               "Bytes of durable state values (what the budget bounds)",
               MetricType::Gauge, d(s.state_bytes)),
        Family("twice_store_budget_bytes",
               "Byte budget of durable states (0 = unbounded)",
               MetricType::Gauge, d(s.budget_bytes)),
        Family("twice_store_states", "Durable states stored", MetricType::Gauge,
               d(s.state_count)),
        Family("twice_store_blocks", "Blocks of chunked states stored",
               MetricType::Gauge, d(s.block_count)),
        Family("twice_store_pinned_states",
               "Stored states that pinned documents name", MetricType::Gauge,
               d(s.pinned_state_count)),
        Family("twice_store_documents", "Documents stored", MetricType::Gauge,
               d(s.document_count)),
        Family("twice_store_disk_bytes", "Live SST and blob file bytes",
               MetricType::Gauge, d(s.disk_bytes)),
        Family("twice_store_hits_total", "State reads that found the state",
               MetricType::Counter, d(s.hits)),
        Family("twice_store_misses_total",
               "State reads that found it missing, expired or corrupt",
               MetricType::Counter, d(s.misses)),
        Family("twice_store_evictions_total",
               "States evicted to stay within the budget", MetricType::Counter,
               d(s.evictions)),
        Family("twice_store_evicted_bytes_total", "Bytes evicted",
               MetricType::Counter, d(s.evicted_bytes)),
        Family("twice_store_corruptions_total",
               "Stored values found corrupt and deleted", MetricType::Counter,
               d(s.corruptions)),
        Family("twice_store_recomputes_total",
               "States recomputed from tokens after a miss",
               MetricType::Counter, d(s.recomputes)),
        Family("twice_store_catalog_corruptions_total",
               "Corruption met in document records, token blobs or their "
               "files (kept, never recomputed)",
               MetricType::Counter, d(s.catalog_corruptions)),
        Family("twice_store_record_notifies_unacknowledged_total",
               "Record writes of this process that some watcher left "
               "unacknowledged, each waiting out the readers' lease (RADOS)",
               MetricType::Counter, d(s.record_notifies_unacknowledged)),
        Family("twice_store_record_watch_changes_total",
               "Record changes and watch errors this process's record "
               "watches saw (RADOS)",
               MetricType::Counter, d(s.record_watch_changes)),
    };
  }

 private:
  storage::Store* store_;
};

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& listen, storage::Store* store) {
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  endpoint->registry_ = std::make_shared<prometheus::Registry>();
  endpoint->store_collector_ = std::make_shared<StoreCollector>(store);
  endpoint->requests_ =
      &prometheus::BuildCounter()
           .Name("twice_grpc_requests_total")
           .Help("Finished gRPC calls by method and status code")
           .Register(*endpoint->registry_);
  endpoint->latency_ =
      &prometheus::BuildHistogram()
           .Name("twice_grpc_request_duration_seconds")
           .Help(
               "Time from a call's arrival to its status, by method and "
               "status code")
           .Register(*endpoint->registry_);
  endpoint->in_flight_ =
      &prometheus::BuildGauge()
           .Name("twice_grpc_requests_in_flight")
           .Help("Calls being served now (queued or running), by method")
           .Register(*endpoint->registry_);
  endpoint->gauges_ = std::make_shared<GaugeCollector>();
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> http =
      MetricsHttpServer::Start(listen);
  if (!http.ok()) return http.status();
  endpoint->http_ = *std::move(http);
  endpoint->http_->RegisterCollectable(endpoint->registry_);
  endpoint->http_->RegisterCollectable(endpoint->store_collector_);
  endpoint->http_->RegisterCollectable(ServingMetrics::Process().registry());
  endpoint->http_->RegisterCollectable(endpoint->gauges_);
  endpoint->port_ = endpoint->http_->port();
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() = default;

std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MetricsEndpoint::InterceptorCreators() {
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      creators;
  creators.push_back(std::make_unique<CountingInterceptorFactory>(this));
  return creators;
}

void MetricsEndpoint::CountRequest(const std::string& method, int code) {
  // Family::Add returns the existing counter for known labels.
  requests_->Add({{"method", method}, {"code", std::to_string(code)}})
      .Increment();
}

void MetricsEndpoint::FinishRequest(const std::string& method, int code,
                                    double seconds) {
  const std::string code_text = std::to_string(code);
  requests_->Add({{"method", method}, {"code", code_text}}).Increment();
  latency_->Add({{"method", method}, {"code", code_text}}, LatencyBuckets())
      .Observe(seconds);
}

void MetricsEndpoint::AddInFlight(const std::string& method, double delta) {
  in_flight_->Add({{"method", method}}).Increment(delta);
}

void MetricsEndpoint::AddGauge(std::string name, std::string help,
                               std::function<double()> read) {
  gauges_->Add({std::move(name), std::move(help), std::move(read)});
}

}  // namespace twice::services
