#include "services/store/store_metrics.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

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

class CountingInterceptor : public grpc::experimental::Interceptor {
 public:
  CountingInterceptor(MetricsEndpoint* metrics, const char* method)
      : metrics_(metrics), method_(method != nullptr ? method : "") {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_->CountRequest(method_, methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  MetricsEndpoint* metrics_;
  std::string method_;
};

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

// The store's counters as Prometheus families, read at each scrape so the
// numbers are never stale and nothing is copied in between.
class StoreCollector : public prometheus::Collectable {
 public:
  explicit StoreCollector(storage::StateStore* store) : store_(store) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    using prometheus::MetricType;
    const storage::StoreStats s = store_->Stats();
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
    };
  }

 private:
  storage::StateStore* store_;
};

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& listen, storage::StateStore* store) {
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  endpoint->registry_ = std::make_shared<prometheus::Registry>();
  endpoint->store_collector_ = std::make_shared<StoreCollector>(store);
  endpoint->requests_ =
      &prometheus::BuildCounter()
           .Name("twice_grpc_requests_total")
           .Help("Finished gRPC calls by method and status code")
           .Register(*endpoint->registry_);
  // prometheus-cpp reports a failed bind by throwing; it stops here.
  try {
    endpoint->exposer_ = std::make_unique<prometheus::Exposer>(listen, 1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("metrics endpoint on ", listen, ": ", e.what()));
  }
  endpoint->exposer_->RegisterCollectable(endpoint->registry_);
  endpoint->exposer_->RegisterCollectable(endpoint->store_collector_);
  const std::vector<int> ports = endpoint->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(
        absl::StrCat("metrics endpoint on ", listen, " bound no port"));
  }
  endpoint->port_ = ports.front();
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

}  // namespace twice::services
