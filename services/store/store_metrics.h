// Prometheus metrics of a twice-server process (GET /metrics on
// --metrics_listen): the store's counters, read at scrape time; every gRPC
// call by method and status code (count, latency, in flight); and the
// serving metrics the handlers record (ServingMetrics: time to first token,
// tokens and tokens/s, states reused and recomputed). deploy/METRICS.md
// lists every name.
//
// Scraping reads StateStore::Stats(), so a scrape costs what Stats costs (a
// few RocksDB property reads; one RPC per replica for a remote store).
// Thread-safe.
#ifndef TWICE_SERVICES_STORE_STORE_METRICS_H_
#define TWICE_SERVICES_STORE_STORE_METRICS_H_

#include <grpcpp/support/server_interceptor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "storage/store.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace twice::services {

// What the serving handlers record, process-wide: one twice-server process
// is one scrape target, and handlers record whether or not an endpoint
// exports them (recording is a few atomic adds). Thread-safe.
class ServingMetrics {
 public:
  static ServingMetrics& Process();

  // Time from the public Ask call to its first token (orchestrator).
  void ObserveAskTtft(double seconds);
  // Time from a Generate call to its first token (decode).
  void ObserveDecodeTtft(double seconds);
  // Tokens read by the prefill service (computed, not reused).
  void AddPrefilledTokens(int64_t tokens, double tokens_per_second);
  // Tokens sampled by the decode service.
  void AddDecodedTokens(int64_t tokens, double tokens_per_second);
  // Tokens the decode service read before sampling: second reads, as-of
  // tails and prompts (prefill work done in the answering call).
  void AddDecodeReadTokens(int64_t tokens);
  // States an answer or ingest reused, and recomputed after a miss
  // (orchestrator, as its answers report them).
  void AddStatesReused(int64_t n);
  void AddStatesRecomputed(int64_t n);
  // An ask started from a cached record (record_cache.h): confirmed by the
  // record read, or changed meanwhile and answered again.
  void AddCachedRecordAsk(bool confirmed);
  // An ask answered from a cached record that the store's watch showed
  // unchanged (storage/record_watch.h), with no record read.
  void AddWatchedRecordAsk();

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  ServingMetrics();

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram* ask_ttft_ = nullptr;
  prometheus::Histogram* decode_ttft_ = nullptr;
  prometheus::Counter* prefilled_ = nullptr;
  prometheus::Counter* decoded_ = nullptr;
  prometheus::Counter* decode_read_ = nullptr;
  prometheus::Histogram* prefill_rate_ = nullptr;
  prometheus::Histogram* decode_rate_ = nullptr;
  prometheus::Counter* reused_ = nullptr;
  prometheus::Counter* recomputed_ = nullptr;
  prometheus::Counter* cached_record_confirmed_ = nullptr;
  prometheus::Counter* cached_record_changed_ = nullptr;
  prometheus::Counter* cached_record_watched_ = nullptr;
};

class MetricsEndpoint {
 public:
  // Listens on `listen` (host:port; port 0 picks one). `store` must outlive
  // the endpoint. UNAVAILABLE when the address cannot be bound.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& listen, storage::Store* store);
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
  // Records one finished call: count and latency by method and code.
  void FinishRequest(const std::string& method, int code, double seconds);
  // Calls of `method` being served now (+1 on arrival, -1 when done).
  void AddInFlight(const std::string& method, double delta);
  // Exports `read()` as the gauge `name` at every scrape. Call before the
  // server starts; `read` must stay valid as long as the endpoint.
  void AddGauge(std::string name, std::string help,
                std::function<double()> read);

 private:
  MetricsEndpoint() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_ = nullptr;  // in registry_
  prometheus::Family<prometheus::Histogram>* latency_ = nullptr;
  prometheus::Family<prometheus::Gauge>* in_flight_ = nullptr;
  std::shared_ptr<class GaugeCollector> gauges_;
  std::shared_ptr<class StoreCollector> store_collector_;
  std::unique_ptr<class MetricsHttpServer> http_;
  int port_ = 0;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_STORE_STORE_METRICS_H_
