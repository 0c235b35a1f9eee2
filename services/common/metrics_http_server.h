// MetricsHttpServer: serves `GET /metrics` — the Prometheus text format of
// its collectables — over HTTP/1.1 on one thread of its own.
//
// Why not prometheus-cpp's Exposer: it runs Debian's civetweb, which
// creates its worker threads with a fixed 100 KB stack, and glibc carves
// every library's static thread-local storage out of that stack (OpenBLAS
// alone takes 60 KB). With the CUDA runtime loaded too, the scrape handler
// overflowed the rest (SIGSEGV; under AddressSanitizer it already did).
// This server's thread has an ordinary stack, and a scrape is one small
// request every few seconds, so one thread answering connections in turn is
// enough.
//
// Requests: GET (or HEAD) /metrics -> 200 text/plain; version=0.0.4; other
// paths 404; other methods 405; a request that is not HTTP, or larger than
// 8 KiB, or slower than 5 s, is answered 400 or dropped. Every response
// closes its connection.
//
// Thread safety: RegisterCollectable may be called at any time; the
// destructor stops the thread and closes the socket.
#ifndef TWICE_SERVICES_COMMON_METRICS_HTTP_SERVER_H_
#define TWICE_SERVICES_COMMON_METRICS_HTTP_SERVER_H_

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"

namespace twice::services {

class MetricsHttpServer {
 public:
  // Binds `listen` ("host:port", "[v6]:port"; port 0 picks a free one).
  // UNAVAILABLE when it cannot be bound, INVALID_ARGUMENT when it does not
  // parse.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& listen);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Collected at every scrape while it lives.
  void RegisterCollectable(std::weak_ptr<prometheus::Collectable> collectable);

  // The port bound.
  int port() const { return port_; }

 private:
  MetricsHttpServer(int listen_fd, int wake_read, int wake_write, int port);
  void Serve();
  void Answer(int fd);
  std::string Scrape();

  const int listen_fd_;
  const int wake_read_;  // written by the destructor to stop Serve()
  const int wake_write_;
  const int port_;
  std::mutex mu_;
  std::vector<std::weak_ptr<prometheus::Collectable>> collectables_;
  std::thread thread_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_METRICS_HTTP_SERVER_H_
