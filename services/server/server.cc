#include "services/server/server.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/executor/resident_model.h"
#include "engine/runtime/kernel_device.h"
#include "services/common/auth.h"
#include "services/common/log.h"
#include "services/common/process_memory.h"
#include "services/common/request_id.h"
#include "services/common/tls.h"
#include "services/decode/decode_service.h"
#include "services/orchestrator/orchestrator_service.h"
#include "services/prefill/prefill_service.h"
#include "services/server/internal_only_services.h"
#include "services/server/janitor_runner.h"
#include "services/server/server_store.h"
#include "services/store/remote_state_store.h"
#include "services/store/store_metrics.h"
#include "services/store/store_service.h"

namespace twice::services {
namespace {

// Internal traffic carries whole states in 1 MiB chunks and token arrays in
// 256 KiB chunks; 16 MiB leaves room without inviting huge messages.
constexpr int kMaxMessageBytes = 16 << 20;
// Except a Generate request, which carries the tokens the decode service
// reads before the prompt (a second read of a whole document: up to twice
// max_document_tokens, 4 M tokens by default, at <= 4 bytes per packed id)
// in one message, so that its read starts from one self-contained request.
constexpr int kMaxDecodeMessageBytes = 64 << 20;

// Interceptors every internal channel runs: the internal token, when this
// process has one, so the called role trusts the tenant named in requests.
std::vector<
    std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
InternalInterceptors(const std::string& internal_token) {
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      creators;
  if (!internal_token.empty()) {
    creators.push_back(NewBearerTokenInterceptorFactory(internal_token));
  }
  return creators;
}

std::shared_ptr<grpc::Channel> Connect(
    const std::string& address,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const std::string& internal_token) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  // A dns:/// name of a headless Service resolves to every pod behind it;
  // round robin spreads calls over all of them (pick-first would pin one).
  args.SetLoadBalancingPolicyName("round_robin");
  // A restarted role is back within a second or two; gRPC's default
  // reconnect backoff (1 s growing to 120 s) would keep failing calls to it
  // for minutes after (measured in the kill campaign, docs/RELIABILITY.md).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, credentials, args, InternalInterceptors(internal_token));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TwiceServer>> TwiceServer::Start(
    const ServerOptions& options) {
  absl::Status valid = options.Validate();
  if (!valid.ok()) return valid;
  // Only the roles that run models have kernels to place.
  if (RoleNeedsModels(options.role) && options.role != Role::kOrchestrator) {
    absl::StatusOr<std::string> device =
        engine::UseKernelDevice(options.device);
    if (!device.ok()) return device.status();
    Log(LogLevel::kInfo, "server.device",
        absl::StrCat("kernels=", LogValue(*device)));
  }
  std::unique_ptr<TwiceServer> server(new TwiceServer());
  server->options_ = options;
  const Role role = options.role;

  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> server_credentials =
      MakeServerCredentials(options.tls);
  if (!server_credentials.ok()) return server_credentials.status();
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
      channel_credentials = MakeChannelCredentials(options.tls);
  if (!channel_credentials.ok()) return channel_credentials.status();
  if (!options.tls.server_tls() && !IsLoopbackListen(options.listen)) {
    Log(LogLevel::kWarning, "server.plaintext",
        absl::StrCat("listen=", LogValue(options.listen), " reason=",
                     LogValue("--allow_plaintext: calls and tokens travel "
                              "unencrypted")));
  }
  // The internal token this process presents to, and requires from, the
  // other roles. Role all with a token file but no internal token makes a
  // random one: its orchestrator calls its own prefill and decode in
  // process, and no other process needs to know it.
  std::string internal_token;
  if (!options.internal_token_file.empty()) {
    absl::StatusOr<std::string> token =
        ReadInternalToken(options.internal_token_file);
    if (!token.ok()) return token.status();
    internal_token = *std::move(token);
  } else if (role == Role::kAll && !options.auth_tokens_file.empty()) {
    internal_token = NewRandomToken();
  }
  AuthOptions auth_options;
  auth_options.tokens_file = options.auth_tokens_file;
  auth_options.internal_token = internal_token;
  auth_options.internal_peer_names = options.internal_peer_names;
  {
    absl::StatusOr<std::unique_ptr<Authenticator>> auth =
        Authenticator::Create(auth_options);
    if (!auth.ok()) return auth.status();
    if ((*auth)->enabled()) server->auth_ = *std::move(auth);
  }
  Authenticator* auth = server->auth_.get();
  Log(LogLevel::kInfo, "server.security",
      absl::StrCat(
          "tls=", options.tls.server_tls() ? "on" : "off",
          " mtls=", options.tls.client_ca_file.empty() ? "off" : "on",
          " outgoing_tls=", options.tls.ca_file.empty() ? "off" : "on",
          " tenant_tokens=", options.auth_tokens_file.empty() ? "off" : "on",
          " internal_token=", internal_token.empty() ? "off" : "on",
          " internal_peer_names=", options.internal_peer_names.size()));

  // The orchestrator tokenizes and plans but never runs a model, so role
  // orchestrator reads only each model's tokenizer (model_cards.h).
  if (role == Role::kOrchestrator) {
    server->model_cards_ = std::make_unique<ModelCards>();
    for (const ModelSpec& spec : options.models) {
      absl::Status added =
          server->model_cards_->AddTokenizerOnly(spec.name, spec.dir);
      if (!added.ok()) return added;
      Log(LogLevel::kInfo, "model.tokenizer_loaded",
          absl::StrCat("name=", spec.name, " dir=", LogValue(spec.dir)));
    }
  } else if (RoleNeedsModels(role)) {
    const engine::LoadOptions load = options.ModelLoadOptions();
    for (const ModelSpec& spec : options.models) {
      absl::Status loaded = server->models_.Load(spec.name, spec.dir, load);
      if (!loaded.ok()) return loaded;
      const engine::ModelDescription& d =
          (*server->models_.Find(spec.name))->description();
      const bool resident =
          load.resident &&
          engine::IsResidentModel(**server->models_.Find(spec.name));
      Log(LogLevel::kInfo, "model.loaded",
          absl::StrCat(
              "name=", spec.name, " arch=", d.architecture,
              " weights_dtype=", engine::WeightsDTypeName(load.weights_dtype),
              " executor=", resident ? "resident" : "offload",
              resident ? absl::StrCat(" prefill_chunk=",
                                      engine::ResidentPrefillChunk(load))
                       : "",
              " layers=", d.num_layers, " hidden=", d.hidden_size,
              " fingerprint=", d.fingerprint.substr(0, 16)));
    }
  }

  absl::StatusOr<std::unique_ptr<storage::Store>> opened =
      OpenServerStore(options, [&](const std::string& address) {
        return Connect(address, *channel_credentials, internal_token);
      });
  if (!opened.ok()) return opened.status();
  server->store_ = *std::move(opened);
  storage::Store* store = server->store_.get();
  const ModelRegistry* models = &server->models_;

  if (!options.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> metrics =
        MetricsEndpoint::Start(options.metrics_listen, store);
    if (!metrics.ok()) return metrics.status();
    server->metrics_ = *std::move(metrics);
    server->metrics_->AddGauge(
        "process_resident_memory_bytes",
        "Resident memory of this process in bytes",
        [] { return static_cast<double>(ResidentMemoryBytes()); });
    if (role == Role::kAll || role == Role::kOrchestrator) {
      server->metrics_->AddGauge(
          "twice_auth_token_file_errors",
          "Reloads of --auth_tokens_file that failed (missing, unreadable or "
          "malformed) and left no tenant token valid",
          [auth] {
            return auth != nullptr
                       ? static_cast<double>(auth->token_file_errors())
                       : 0.0;
          });
    }
    if (engine::KernelDeviceStats().has_value()) {
      // How much of the kernel work the device ran (--device=cuda).
      auto stat = [](int64_t engine::KernelDeviceCounts::*field) {
        return [field] {
          std::optional<engine::KernelDeviceCounts> counts =
              engine::KernelDeviceStats();
          return counts.has_value() ? static_cast<double>((*counts).*field)
                                    : 0.0;
        };
      };
      server->metrics_->AddGauge(
          "twice_kernel_device_calls", "Kernel calls the device backend ran",
          stat(&engine::KernelDeviceCounts::device_calls));
      server->metrics_->AddGauge(
          "twice_kernel_cpu_fallbacks",
          "Kernel calls the device backend declined (run on the CPU)",
          stat(&engine::KernelDeviceCounts::cpu_fallbacks));
      server->metrics_->AddGauge(
          "twice_kernel_bytes_to_device",
          "Bytes of kernel inputs and states copied host to device",
          stat(&engine::KernelDeviceCounts::bytes_to_device));
      server->metrics_->AddGauge(
          "twice_kernel_bytes_to_host",
          "Bytes of kernel outputs and states copied device to host",
          stat(&engine::KernelDeviceCounts::bytes_to_host));
      server->metrics_->AddGauge(
          "twice_kernel_weight_bytes_to_device",
          "Bytes of weights uploaded to the device (once per weight)",
          stat(&engine::KernelDeviceCounts::weight_bytes_to_device));
    }
    // The resident executors' traffic (--executor=resident): what crossed
    // between host and device besides the one upload of the weights.
    std::vector<const engine::ResidentModel*> resident;
    for (const std::string& name : server->models_.names()) {
      absl::StatusOr<const engine::Model*> model = server->models_.Find(name);
      if (!model.ok()) continue;
      if (const auto* r = dynamic_cast<const engine::ResidentModel*>(*model)) {
        resident.push_back(r);
      }
    }
    if (!resident.empty()) {
      auto sum = [resident](auto read) {
        return [resident, read] {
          double total = 0.0;
          for (const engine::ResidentModel* r : resident) {
            total += static_cast<double>(read(r->executor()));
          }
          return total;
        };
      };
      server->metrics_->AddGauge(
          "twice_resident_bytes_to_device",
          "Bytes resident executors copied host to device (token ids, slot "
          "maps, sampling rules, states resumed from the host)",
          sum([](const engine::ResidentExecutor& e) {
            return e.traffic().bytes_to_device;
          }));
      server->metrics_->AddGauge(
          "twice_resident_bytes_to_host",
          "Bytes resident executors copied device to host (sampled ids, "
          "prefill logits, states saved to the store)",
          sum([](const engine::ResidentExecutor& e) {
            return e.traffic().bytes_to_host;
          }));
      server->metrics_->AddGauge(
          "twice_resident_step_graph_launches",
          "Decode steps resident executors replayed as recorded device "
          "graphs (--resident_step_graphs)",
          sum([](const engine::ResidentExecutor& e) {
            return e.traffic().graph_launches;
          }));
      server->metrics_->AddGauge(
          "twice_resident_host_wait_seconds",
          "Time resident executors' callers spent blocked on the device "
          "(copies to the host)",
          sum([](const engine::ResidentExecutor& e) {
            return static_cast<double>(e.traffic().host_wait_ns) / 1e9;
          }));
      server->metrics_->AddGauge(
          "twice_resident_sequences",
          "Sequence states held in resident executors' device slots",
          sum([](const engine::ResidentExecutor& e) { return e.sequences(); }));
      server->metrics_->AddGauge(
          "twice_resident_batched_prefills",
          "Reads of at most one prefill pass that resident models ran in a "
          "shared pass with other concurrent reads",
          [resident] {
            double total = 0.0;
            for (const engine::ResidentModel* r : resident) {
              total += static_cast<double>(r->batched_prefills());
            }
            return total;
          });
      server->metrics_->AddGauge(
          "twice_resident_kv_free_tokens",
          "Free tokens in resident full-attention models' paged KV caches",
          sum([](const engine::ResidentExecutor& e) {
            return e.free_kv_tokens();
          }));
    }
    Log(LogLevel::kInfo, "metrics.started",
        absl::StrCat("listen=", options.metrics_listen,
                     " port=", server->metrics_->port()));
  }
  if (role == Role::kJanitor) {
    absl::StatusOr<std::unique_ptr<JanitorRunner>> janitor =
        JanitorRunner::Start(options);
    if (!janitor.ok()) return janitor.status();
    server->janitor_ = *std::move(janitor);
    if (server->metrics_ != nullptr) {
      server->janitor_->AddMetrics(*server->metrics_);
    }
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  auto interceptors = [&] {
    // Request ids first, so the metrics interceptor and the handler run
    // with the call's id set.
    std::vector<
        std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        creators;
    creators.push_back(NewRequestIdInterceptorFactory());
    if (server->metrics_ != nullptr) {
      for (auto& creator : server->metrics_->InterceptorCreators()) {
        creators.push_back(std::move(creator));
      }
    }
    return creators;
  };
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *server_credentials, &server->port_);
  builder.SetMaxReceiveMessageSize(
      role == Role::kDecode ? kMaxDecodeMessageBytes : kMaxMessageBytes);
  builder.experimental().SetInterceptorCreators(interceptors());
  // Role all keeps the services that trust the tenant named in a request
  // (Store data RPCs, Prefill, Decode) on a second server that has no
  // public port: its orchestrator reaches them in process, and other roles
  // only through --internal_listen. Every other role has one listener,
  // which serves exactly its own services.
  const bool all = role == Role::kAll;
  grpc::ServerBuilder internal_builder;
  grpc::ServerBuilder& internal = all ? internal_builder : builder;
  if (all) {
    if (!options.internal_listen.empty()) {
      internal_builder.AddListeningPort(options.internal_listen,
                                        *server_credentials,
                                        &server->internal_port_);
    }
    internal_builder.SetMaxReceiveMessageSize(kMaxDecodeMessageBytes);
    internal_builder.experimental().SetInterceptorCreators(interceptors());
  }

  auto add = [&](grpc::ServerBuilder& to,
                 std::unique_ptr<grpc::Service> service) {
    to.RegisterService(service.get());
    server->services_.push_back(std::move(service));
  };
  const std::string backup_dir = options.backup_dir.empty()
                                     ? options.data_dir + "-backups"
                                     : options.backup_dir;
  if (all || role == Role::kStore) {
    auto service = std::make_unique<StoreService>(store, backup_dir);
    service->SetAuthenticator(auth);
    add(internal, std::move(service));
  }
  if (all) {
    // The public face of the internal services: the Store's admin RPCs
    // (twice store ...), and a clear refusal for everything else.
    auto store_admin = std::make_unique<StoreService>(store, backup_dir,
                                                      /*serve_data=*/false);
    store_admin->SetAuthenticator(auth);
    add(builder, std::move(store_admin));
    add(builder, std::make_unique<RefusingPrefillService>());
    add(builder, std::make_unique<RefusingDecodeService>());
  }
  if (all || role == Role::kPrefill) {
    auto service = std::make_unique<PrefillService>(models, store,
                                                    options.state_cache_bytes);
    service->SetAuthenticator(auth);
    add(internal, std::move(service));
  }
  if (all || role == Role::kDecode) {
    auto decode =
        std::make_unique<DecodeService>(models, store, options.decode_limits);
    decode->SetAuthenticator(auth);
    if (server->metrics_ != nullptr) {
      // Queue depth of the decode loops, read at each scrape.
      DecodeService* service = decode.get();
      server->metrics_->AddGauge(
          "twice_decode_active_sequences",
          "Sequences the decode loops are decoding now", [service] {
            v1::DecodeStats stats;
            (void)service->Stats(nullptr, nullptr, &stats);
            return static_cast<double>(stats.active_sequences());
          });
    }
    add(internal, std::move(decode));
  }
  OrchestratorService* orchestrator = nullptr;
  if (all || role == Role::kOrchestrator) {
    if (server->model_cards_ == nullptr) {
      server->model_cards_ = ModelCards::FromRegistry(server->models_);
    }
    auto service = std::make_unique<OrchestratorService>(
        server->model_cards_.get(), store, options.orchestrator_limits,
        options.templates, auth);
    for (const ModelSpec& spec : options.models) {
      absl::Status templates = service->LoadModelTemplates(spec.name, spec.dir);
      if (!templates.ok()) return templates;
    }
    // A record read across the network is a round trip before every
    // question's first token; in process it costs microseconds.
    const bool store_across_network =
        options.store == "rados" || !options.store_address.empty();
    if (store_across_network && options.ask_record_cache_bytes > 0) {
      service->EnableRecordCache(options.ask_record_cache_bytes);
    }
    orchestrator = service.get();
    add(builder, std::move(service));
  }

  if (all) {
    server->internal_server_ = internal_builder.BuildAndStart();
    if (server->internal_server_ == nullptr ||
        (!options.internal_listen.empty() && server->internal_port_ == 0)) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ",
                                                 options.internal_listen,
                                                 " (--internal_listen)"));
    }
    server->internal_server_->GetHealthCheckService()->SetServingStatus(true);
  }
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen));
  }
  if (orchestrator != nullptr) {
    // In role all the orchestrator reaches prefill and decode through the
    // same gRPC interfaces, over the internal server's in-process channel;
    // that channel exists only once the server runs, hence the late
    // binding. Otherwise each address list (comma-separated) names the
    // endpoints the orchestrator spreads its calls over.
    std::vector<Endpoint<v1::Prefill::StubInterface>> prefill;
    std::vector<Endpoint<v1::Decode::StubInterface>> decode;
    if (all) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(kMaxMessageBytes);
      std::shared_ptr<grpc::Channel> channel =
          server->internal_server_->experimental()
              .InProcessChannelWithInterceptors(
                  args, InternalInterceptors(internal_token));
      prefill.push_back({"in-process", v1::Prefill::NewStub(channel)});
      decode.push_back({"in-process", v1::Decode::NewStub(channel)});
    } else {
      for (absl::string_view address :
           absl::StrSplit(options.prefill_address, ',', absl::SkipEmpty())) {
        prefill.push_back(
            {std::string(address),
             v1::Prefill::NewStub(Connect(
                 std::string(address), *channel_credentials, internal_token))});
      }
      for (absl::string_view address :
           absl::StrSplit(options.decode_address, ',', absl::SkipEmpty())) {
        decode.push_back(
            {std::string(address),
             v1::Decode::NewStub(Connect(
                 std::string(address), *channel_credentials, internal_token))});
      }
    }
    orchestrator->BindInternalServices(std::move(prefill), std::move(decode));
  }
  server->server_->GetHealthCheckService()->SetServingStatus(true);
  Log(LogLevel::kInfo, "server.started",
      absl::StrCat("role=", std::string(RoleName(role)),
                   " listen=", options.listen, " port=", server->port_,
                   " internal_listen=", LogValue(options.internal_listen),
                   " internal_port=", server->internal_port_));
  return server;
}

void TwiceServer::Shutdown() {
  if (shut_down_) return;
  if (server_ == nullptr) {
    // Start failed after the internal server started: stop it, or the
    // destructor would wait for it forever.
    if (internal_server_ != nullptr) {
      shut_down_ = true;
      internal_server_->Shutdown(std::chrono::system_clock::now());
    }
    return;
  }
  shut_down_ = true;
  // Readiness goes false first so load balancers stop sending new calls.
  server_->GetHealthCheckService()->SetServingStatus(false);
  Log(LogLevel::kInfo, "server.draining",
      absl::StrCat("grace_seconds=", options_.shutdown_grace_seconds,
                   " drain_delay_seconds=", options_.drain_delay_seconds));
  // Still serving while NOT_SERVING propagates: load balancers and
  // Kubernetes endpoints drop this server before it stops accepting calls.
  if (options_.drain_delay_seconds > 0) {
    std::this_thread::sleep_for(
        std::chrono::seconds(options_.drain_delay_seconds));
  }
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::seconds(options_.shutdown_grace_seconds);
  server_->Shutdown(deadline);
  // After the public calls: an orchestrator call still finishing needs
  // the internal services until it returns.
  if (internal_server_ != nullptr) internal_server_->Shutdown(deadline);
  Log(LogLevel::kInfo, "server.stopped", "");
}

void TwiceServer::Wait() {
  if (server_ != nullptr) server_->Wait();
  if (internal_server_ != nullptr) internal_server_->Wait();
}

TwiceServer::~TwiceServer() {
  Shutdown();
  if (server_ != nullptr) server_->Wait();
  if (internal_server_ != nullptr) internal_server_->Wait();
  server_.reset();
  internal_server_.reset();
  services_.clear();
  metrics_.reset();
  store_.reset();
}

}  // namespace twice::services
