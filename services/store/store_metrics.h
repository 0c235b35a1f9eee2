// MetricsEndpoint: one server process's Prometheus endpoint (GET /metrics on
// --metrics_listen): the store's counters, read at scrape time, and a count
// of finished gRPC calls by method and status code.
//
// Scraping reads StateStore::Stats(), so a scrape costs what Stats costs (a
// few RocksDB property reads; one RPC for a remote store). Thread-safe.
#ifndef TWICE_SERVICES_STORE_STORE_METRICS_H_
#define TWICE_SERVICES_STORE_STORE_METRICS_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "storage/state_store.h"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace twice::services {

class MetricsEndpoint {
 public:
  // Listens on `listen` (host:port; port 0 picks one). `store` must outlive
  // the endpoint. UNAVAILABLE when the address cannot be bound.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& listen, storage::StateStore* store);
  ~MetricsEndpoint();

  // The port actually bound.
  int port() const { return port_; }

  // Interceptor factories for grpc::ServerBuilder that count every finished
  // call in twice_grpc_requests_total. The endpoint must outlive the server.
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
  InterceptorCreators();

  // Counts one finished call (what the interceptors call).
  void CountRequest(const std::string& method, int code);

 private:
  MetricsEndpoint() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_ = nullptr;  // in registry_
  std::shared_ptr<class StoreCollector> store_collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_STORE_STORE_METRICS_H_
