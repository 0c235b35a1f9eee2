// twice-server: runs the Twice services of one role until SIGTERM/SIGINT.
//
//   twice-server --role=all --listen=127.0.0.1:50051 --data-dir=twice-data
//
// With --listen=HOST:0 a free port is chosen; the first line on stdout is
// always "twice-server listening on HOST:PORT"; with --internal_listen the
// second is "twice-server internal services on HOST:PORT".
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "services/common/flag_names.h"
#include "services/common/log.h"
#include "services/server/default_model.h"
#include "services/server/server.h"

ABSL_FLAG(std::string, role, "all",
          "Services to run: all | orchestrator | prefill | decode | store | "
          "janitor");
ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "host:port to listen on; port 0 picks a free port");
ABSL_FLAG(std::string, data_dir, "twice-data",
          "Directory of the embedded state store");
ABSL_FLAG(std::vector<std::string>, model, {},
          "Model directories to serve, as DIR or NAME=DIR, comma-separated; "
          "the first is the default. Empty: the built-in default model, "
          "created under DATA_DIR/models/ on first start");
ABSL_FLAG(std::string, store_address, "",
          "host:port of a store role to use instead of an embedded store");
ABSL_FLAG(std::string, store, "rocksdb",
          "Where documents and states live: rocksdb (embedded, or the store "
          "role at --store_address) | rados (a Ceph cluster every role uses "
          "directly; --rados_conf)");
ABSL_FLAG(std::string, rados_conf, "",
          "--store=rados: the cluster's ceph.conf (monitors, auth)");
ABSL_FLAG(std::string, rados_user, "admin",
          "--store=rados: the cephx user, without \"client.\"");
ABSL_FLAG(std::string, rados_pool_prefix, "twice",
          "--store=rados: pools PREFIX-meta (records, tokens) and "
          "PREFIX-states, created when missing");
ABSL_FLAG(int, rados_op_timeout_seconds, 10,
          "--store=rados: deadline of every cluster operation; a paused or "
          "partitioned cluster fails calls UNAVAILABLE after it");
ABSL_FLAG(int, janitor_lease_seconds, 30,
          "Role janitor: how long its lock outlives a janitor that stopped "
          "renewing it (a standby takes over after it)");
ABSL_FLAG(int, janitor_interval_seconds, 60,
          "Role janitor: seconds between passes");
ABSL_FLAG(int, janitor_grace_seconds, 3600,
          "Role janitor: objects no record names are deleted only once older "
          "than this (writes in flight store them before their record)");
ABSL_FLAG(bool, janitor_verify, false,
          "Role janitor: read and check every stored value each pass");
ABSL_FLAG(std::string, prefill_address, "",
          "host:port of the prefill role, or several comma-separated "
          "(role orchestrator)");
ABSL_FLAG(std::string, decode_address, "",
          "host:port of the decode role, or several comma-separated "
          "(role orchestrator)");
ABSL_FLAG(bool, sync_writes, true,
          "Sync the store's write-ahead log on every write");
ABSL_FLAG(int64_t, state_budget_bytes, 0,
          "Byte budget of the store's durable states; puts evict the "
          "least valuable unpinned states to stay within it (0 = unbounded)");
ABSL_FLAG(int64_t, tenant_state_budget_bytes, 0,
          "Per-tenant byte budget of the store's durable states (0 = off): "
          "a tenant's put evicts only its own unpinned states, or fails with "
          "RESOURCE_EXHAUSTED; with tenants' budgets summing to at most "
          "--state_budget_bytes no tenant's put evicts another tenant's "
          "states");
ABSL_FLAG(int64_t, store_min_free_disk_bytes, int64_t{64} << 20,
          "Free bytes the embedded store's disk must keep; below it writes "
          "fail with RESOURCE_EXHAUSTED instead of filling the disk");
ABSL_FLAG(int64_t, store_state_cache_bytes, int64_t{256} << 20,
          "Memory of the embedded store's cache of state values (0 = off: "
          "every read goes to the files)");
ABSL_FLAG(int64_t, state_cache_bytes, int64_t{256} << 20,
          "Memory of the decoded-state cache of the prefill and of the "
          "decode service, each (0 = every load reads the store)");
ABSL_FLAG(int64_t, ask_record_cache_bytes, int64_t{16} << 20,
          "Memory of the orchestrator's cache of asked documents' records, "
          "with a store across the network (--store_address or "
          "--store=rados): on RADOS an ask answers from a cached record "
          "the cluster's watch shows unchanged, with no read; otherwise it "
          "starts from the cached record while the current one is read and "
          "sends nothing until it is confirmed (0 = every ask reads its "
          "record first)");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port of the Prometheus /metrics endpoint; port 0 picks one "
          "(empty = off)");
ABSL_FLAG(int, shutdown_grace_seconds, 10,
          "Seconds in-flight calls may finish after SIGTERM");
ABSL_FLAG(int, drain_delay_seconds, 0,
          "Seconds after SIGTERM during which health reports NOT_SERVING but "
          "calls are still accepted, before the grace period starts");
ABSL_FLAG(std::string, device, "cpu",
          "Where prefill and decode run their kernels: cpu, or cuda (GPU 0; "
          "fails at startup without a CUDA build or a GPU)");
ABSL_FLAG(std::string, weights_dtype, "auto",
          "dtype the models' projection and embedding matrices are kept in: "
          "auto (as stored in the checkpoint, memory mapped), f32, bf16, "
          "f16, or int8 (symmetric, one scale per 64 weights of a row, made "
          "at load); part of the model fingerprint");
ABSL_FLAG(std::string, executor, "auto",
          "How a model with a resident executor (Mamba-2, Based, JRT-RNN, "
          "Llama, Nemotron-H, RAT) runs: resident "
          "(weights, workspace and sequence states stay on "
          "--device, sampling there), offload (the model's own forward on "
          "the kernel backend), or auto (resident with --device=cuda, "
          "offload on the cpu)");
ABSL_FLAG(int, resident_slots, 256,
          "Sequence states resident at once per model with --executor "
          "resident (at least 64, the decode batch); beyond them, idle "
          "states spill to host memory until their next read");
ABSL_FLAG(int64_t, resident_kv_tokens, 65536,
          "Tokens the growing states of a resident model (the KV caches of "
          "Llama and Nemotron-H attention, RAT's closed chunks) hold for all "
          "its sequences together, in blocks of 16 rows; when a read needs "
          "more, idle states spill to host memory");
ABSL_FLAG(bool, resident_step_graphs, true,
          "Record each batch size's decode step of a resident model on a "
          "GPU as a CUDA graph after its first run and replay it (one launch "
          "instead of hundreds), for every architecture; a paged model's "
          "step is recorded again when a sequence outgrows its block table");
ABSL_FLAG(bool, resident_share_prefill_passes, true,
          "Read concurrent requests' short reads (prompts, appends of at "
          "most one prefill pass) that arrive while a resident model is busy "
          "together, in shared prefill passes; false reads them one after "
          "another");
ABSL_FLAG(int64_t, resident_prefill_chunk, 0,
          "Tokens per prefill pass of a resident model (its activation "
          "workspace holds that many rows); 0 picks by --device: 512 on the "
          "cpu, 4096 on a GPU (fewer launches, larger products)");
ABSL_FLAG(std::string, backup_dir, "",
          "Directory `twice store backup` writes checkpoints into; same file "
          "system as --data_dir (empty = DATA_DIR-backups)");
ABSL_FLAG(std::string, log_format, "logfmt",
          "Log line format on stderr: logfmt | json");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: serve TLS (with --tls_key), and the client "
          "certificate of outgoing internal calls");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA: require client certificates signed by it (mTLS). A "
          "certificate alone makes no caller internal: see "
          "--internal_peer_names");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM trust roots: outgoing internal calls (prefill, decode, store) "
          "use TLS and verify the peer against them");
ABSL_FLAG(bool, allow_plaintext, false,
          "Listen without TLS on a non-loopback address (a warning is "
          "logged); without it a server with no certificate listens only on "
          "loopback");
ABSL_FLAG(std::string, auth_tokens_file, "",
          "Bearer tokens of public callers, one `TOKEN TENANT [admin]` per "
          "line; re-read when it changes (empty = no authentication, every "
          "caller is tenant \"default\")");
ABSL_FLAG(std::string, internal_token_file, "",
          "File with the token Twice roles present to and require from each "
          "other");
ABSL_FLAG(std::vector<std::string>, internal_peer_names, {},
          "Comma-separated subject alternative names (DNS or URI, exact, e.g. "
          "spiffe://twice/role/orchestrator) of the client certificates of "
          "Twice roles; needs --tls_client_ca. Other certificates of that CA "
          "are public callers");
ABSL_FLAG(std::string, internal_listen, "",
          "Role all: host:port where its internal services (Store data, "
          "Prefill, Decode) also listen for internal peers (empty = in "
          "process only; the public --listen never serves them)");
ABSL_FLAG(int64_t, max_document_tokens, int64_t{1} << 22,
          "Largest document, in tokens");
ABSL_FLAG(int64_t, max_document_bytes, int64_t{64} << 20,
          "Largest document, in request bytes");
ABSL_FLAG(int64_t, max_question_tokens, 4096, "Largest question, in tokens");
ABSL_FLAG(int32_t, max_new_tokens, 4096,
          "Largest max_tokens a request may ask for");
ABSL_FLAG(int32_t, default_max_tokens, 64,
          "Tokens generated when a request sets no max_tokens");
ABSL_FLAG(int32_t, max_concurrent_calls, 0,
          "Ingest/Append/Ask/BatchAsk calls in flight, all tenants (0 = no "
          "limit)");
ABSL_FLAG(int32_t, max_concurrent_calls_per_tenant, 0,
          "Ingest/Append/Ask/BatchAsk calls in flight per tenant (0 = no "
          "limit)");
ABSL_FLAG(int64_t, max_pinned_documents_per_tenant, 100,
          "Pinned documents one tenant may hold (pinned states are never "
          "evicted; 0 = no limit)");
ABSL_FLAG(int64_t, max_segments_per_document, 4096,
          "Most segments (stored states) per document: bounds the state "
          "writes of one ingest or append");
ABSL_FLAG(int64_t, max_ingest_tokens_per_minute, 0,
          "Document tokens one tenant may ingest or append per minute (0 = "
          "no limit)");

namespace {

using twice::services::Log;
using twice::services::LogLevel;

int g_signal_pipe[2] = {-1, -1};

void OnShutdownSignal(int signal) {
  const unsigned char byte = static_cast<unsigned char>(signal);
  // write() is async-signal-safe; a full pipe means shutdown is under way.
  [[maybe_unused]] ssize_t written = write(g_signal_pipe[1], &byte, 1);
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "twice-server: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Twice server: serves recurrent language models over long documents.\n"
      "  twice-server [--role=all] [--listen=127.0.0.1:50051] "
      "[--data-dir=DIR] [--model=DIR]");
  std::vector<std::string> args =
      twice::services::NormalizeFlagNames(argc, argv);
  std::vector<char*> arg_ptrs;
  for (std::string& arg : args) arg_ptrs.push_back(arg.data());
  absl::ParseCommandLine(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());

  // Libraries start threads before main (OpenBLAS does), so a signal may
  // land on any thread: the handler only writes to a pipe, and a waiter
  // thread does the shutdown.
  if (pipe(g_signal_pipe) != 0) return Fail(absl::InternalError("pipe failed"));
  struct sigaction action = {};
  action.sa_handler = OnShutdownSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  twice::services::LogFormat log_format;
  if (absl::Status parsed = twice::services::ParseLogFormat(
          absl::GetFlag(FLAGS_log_format), &log_format);
      !parsed.ok()) {
    return Fail(parsed);
  }
  twice::services::SetLogFormat(log_format);

  twice::services::ServerOptions options;
  if (absl::Status role =
          twice::services::ParseRole(absl::GetFlag(FLAGS_role), &options.role);
      !role.ok()) {
    return Fail(role);
  }
  options.listen = absl::GetFlag(FLAGS_listen);
  options.data_dir = absl::GetFlag(FLAGS_data_dir);
  options.store_address = absl::GetFlag(FLAGS_store_address);
  options.store = absl::GetFlag(FLAGS_store);
  options.rados_conf = absl::GetFlag(FLAGS_rados_conf);
  options.rados_user = absl::GetFlag(FLAGS_rados_user);
  options.rados_pool_prefix = absl::GetFlag(FLAGS_rados_pool_prefix);
  options.rados_op_timeout_seconds =
      absl::GetFlag(FLAGS_rados_op_timeout_seconds);
  options.janitor_lease_seconds = absl::GetFlag(FLAGS_janitor_lease_seconds);
  options.janitor_interval_seconds =
      absl::GetFlag(FLAGS_janitor_interval_seconds);
  options.janitor_grace_seconds = absl::GetFlag(FLAGS_janitor_grace_seconds);
  options.janitor_verify = absl::GetFlag(FLAGS_janitor_verify);
  options.prefill_address = absl::GetFlag(FLAGS_prefill_address);
  options.decode_address = absl::GetFlag(FLAGS_decode_address);
  options.sync_writes = absl::GetFlag(FLAGS_sync_writes);
  options.state_budget_bytes = absl::GetFlag(FLAGS_state_budget_bytes);
  options.tenant_state_budget_bytes =
      absl::GetFlag(FLAGS_tenant_state_budget_bytes);
  options.store_min_free_disk_bytes =
      absl::GetFlag(FLAGS_store_min_free_disk_bytes);
  options.store_state_cache_bytes =
      absl::GetFlag(FLAGS_store_state_cache_bytes);
  options.ask_record_cache_bytes = absl::GetFlag(FLAGS_ask_record_cache_bytes);
  options.state_cache_bytes = absl::GetFlag(FLAGS_state_cache_bytes);
  options.decode_limits.state_cache_bytes = options.state_cache_bytes;
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.backup_dir = absl::GetFlag(FLAGS_backup_dir);
  options.device = absl::GetFlag(FLAGS_device);
  options.weights_dtype = absl::GetFlag(FLAGS_weights_dtype);
  options.executor = absl::GetFlag(FLAGS_executor);
  options.resident_slots = absl::GetFlag(FLAGS_resident_slots);
  options.resident_kv_tokens = absl::GetFlag(FLAGS_resident_kv_tokens);
  options.resident_step_graphs = absl::GetFlag(FLAGS_resident_step_graphs);
  options.resident_share_prefill_passes =
      absl::GetFlag(FLAGS_resident_share_prefill_passes);
  options.resident_prefill_chunk = absl::GetFlag(FLAGS_resident_prefill_chunk);
  options.drain_delay_seconds = absl::GetFlag(FLAGS_drain_delay_seconds);
  options.shutdown_grace_seconds = absl::GetFlag(FLAGS_shutdown_grace_seconds);
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  options.tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  options.allow_plaintext = absl::GetFlag(FLAGS_allow_plaintext);
  options.auth_tokens_file = absl::GetFlag(FLAGS_auth_tokens_file);
  options.internal_token_file = absl::GetFlag(FLAGS_internal_token_file);
  for (const std::string& name : absl::GetFlag(FLAGS_internal_peer_names)) {
    if (!name.empty()) options.internal_peer_names.push_back(name);
  }
  options.internal_listen = absl::GetFlag(FLAGS_internal_listen);
  options.orchestrator_limits.max_document_tokens =
      absl::GetFlag(FLAGS_max_document_tokens);
  options.orchestrator_limits.max_document_bytes =
      absl::GetFlag(FLAGS_max_document_bytes);
  options.orchestrator_limits.max_question_tokens =
      absl::GetFlag(FLAGS_max_question_tokens);
  options.orchestrator_limits.tenants.max_concurrent_calls =
      absl::GetFlag(FLAGS_max_concurrent_calls);
  options.orchestrator_limits.tenants.max_concurrent_calls_per_tenant =
      absl::GetFlag(FLAGS_max_concurrent_calls_per_tenant);
  options.orchestrator_limits.tenants.max_ingest_tokens_per_minute =
      absl::GetFlag(FLAGS_max_ingest_tokens_per_minute);
  options.orchestrator_limits.max_pinned_documents_per_tenant =
      absl::GetFlag(FLAGS_max_pinned_documents_per_tenant);
  options.orchestrator_limits.max_segments_per_document =
      absl::GetFlag(FLAGS_max_segments_per_document);
  options.decode_limits.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  // A second read holds the document up to twice (read_twice_full) plus
  // the question's preamble.
  options.decode_limits.max_read_tokens =
      2 * absl::GetFlag(FLAGS_max_document_tokens) +
      options.decode_limits.max_prompt_tokens;
  options.decode_limits.default_max_tokens =
      absl::GetFlag(FLAGS_default_max_tokens);
  for (const std::string& spec : absl::GetFlag(FLAGS_model)) {
    std::vector<std::string> parts =
        absl::StrSplit(spec, absl::MaxSplits('=', 1));
    if (parts.size() == 2) {
      options.models.push_back({parts[0], parts[1]});
    } else {
      options.models.push_back({"default", spec});
    }
  }
  if (options.models.empty() &&
      twice::services::RoleNeedsModels(options.role)) {
    absl::StatusOr<std::string> dir =
        twice::services::EnsureDefaultModel(options.data_dir);
    if (!dir.ok()) return Fail(dir.status());
    options.models.push_back({"default", *dir});
  }

  absl::StatusOr<std::unique_ptr<twice::services::TwiceServer>> server =
      twice::services::TwiceServer::Start(options);
  if (!server.ok()) return Fail(server.status());
  const std::string host = options.listen.substr(0, options.listen.rfind(':'));
  std::printf("twice-server listening on %s:%d\n", host.c_str(),
              (*server)->port());
  if ((*server)->internal_port() != 0) {
    const std::string& internal = options.internal_listen;
    std::printf("twice-server internal services on %s:%d\n",
                internal.substr(0, internal.rfind(':')).c_str(),
                (*server)->internal_port());
  }
  std::fflush(stdout);

  std::thread waiter([&] {
    unsigned char received = 0;
    while (read(g_signal_pipe[0], &received, 1) < 0 && errno == EINTR) {
    }
    Log(LogLevel::kInfo, "server.signal", absl::StrCat("signal=", received));
    (*server)->Shutdown();
  });
  (*server)->Wait();
  waiter.join();
  server->reset();  // flushes and closes the store
  return 0;
}
