// TwiceServer: one process's gRPC server with the services of its role,
// health checking and reflection. Used by twice-server's main and by tests
// that start a real server on 127.0.0.1:0.
#ifndef TWICE_SERVICES_SERVER_SERVER_H_
#define TWICE_SERVICES_SERVER_SERVER_H_

#include <grpcpp/server.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/common/auth.h"
#include "services/common/model_registry.h"
#include "services/orchestrator/model_cards.h"
#include "services/server/server_options.h"
#include "storage/store.h"

namespace twice::services {

class MetricsEndpoint;  // services/store/store_metrics.h
class JanitorRunner;    // services/server/janitor_runner.h

class TwiceServer {
 public:
  // Loads models, opens the store and starts listening.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TwiceServer>> Start(
      const ServerOptions& options);
  ~TwiceServer();

  // The port actually bound (useful with port 0).
  int port() const { return port_; }
  // The port of --internal_listen (role all); 0 when there is none.
  int internal_port() const { return internal_port_; }
  // Stops accepting calls, gives in-flight ones the grace period, then
  // cancels the rest. Idempotent. The store is flushed and closed when the
  // server is destroyed.
  void Shutdown();
  // Blocks until Shutdown completes.
  void Wait();

 private:
  TwiceServer() = default;

  ServerOptions options_;
  // Loaded models: roles prefill, decode and all.
  ModelRegistry models_;
  // What the orchestrator knows of them: role orchestrator and all.
  std::unique_ptr<ModelCards> model_cards_;
  std::unique_ptr<storage::Store> store_;
  // Used by the services; nullptr when authentication is off.
  std::unique_ptr<Authenticator> auth_;
  // Reads store_ and counts calls of server_: made after the first,
  // destroyed after the second.
  std::unique_ptr<MetricsEndpoint> metrics_;
  // Role janitor; its counters are read by metrics_, so destroyed first.
  std::unique_ptr<JanitorRunner> janitor_;
  std::vector<std::unique_ptr<grpc::Service>> services_;
  // The public listener, and for role all the server of its internal
  // services (in process, plus --internal_listen when given).
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> internal_server_;
  int port_ = 0;
  int internal_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_SERVER_SERVER_H_
