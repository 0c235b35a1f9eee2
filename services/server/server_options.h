// Options of one twice-server process. Flags live only in main and are
// copied here; Validate() checks them once.
#ifndef TWICE_SERVICES_SERVER_SERVER_OPTIONS_H_
#define TWICE_SERVICES_SERVER_SERVER_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/models/model.h"
#include "services/common/tls.h"
#include "services/decode/decode_service.h"
#include "services/orchestrator/orchestrator_service.h"
#include "services/orchestrator/prompt_templates.h"

namespace twice::services {

enum class Role { kAll, kOrchestrator, kPrefill, kDecode, kStore, kJanitor };

// Whether `role` loads models (all, prefill, decode) or tokenizers
// (orchestrator); store and janitor need none.
inline bool RoleNeedsModels(Role role) {
  return role != Role::kStore && role != Role::kJanitor;
}

struct ModelSpec {
  std::string name;  // name used in requests
  std::string dir;   // HF-layout model directory
};

struct ServerOptions {
  // Which services this process runs. Default: all (whole pipeline, one
  // process, embedded store).
  Role role = Role::kAll;
  // host:port to listen on; port 0 picks a free port. Default:
  // 127.0.0.1:50051.
  std::string listen = "127.0.0.1:50051";
  // Directory of the embedded RocksDB store (roles all and store, and any
  // role without store_address). Default: ./twice-data.
  std::string data_dir = "twice-data";
  // Models to serve; the first is the default. Required for every role but
  // store.
  std::vector<ModelSpec> models;
  // Remote store (role store, host:port) to use instead of an embedded
  // one: one store for a deployment on one node. Past one machine use
  // --store=rados. Default: empty (embedded).
  std::string store_address;
  // Where documents and states live: "rocksdb" (the embedded store, or the
  // store role at store_address) or "rados" (a Ceph cluster that every
  // role reads and writes directly, storage/rados/rados_store.h; for
  // deployments past one machine). Default: "rocksdb".
  std::string store = "rocksdb";
  // --store=rados: the cluster's ceph.conf (required), the cephx user
  // (without "client."), the pool prefix (pools PREFIX-meta and
  // PREFIX-states) and the deadline of every cluster operation, after
  // which a call fails UNAVAILABLE. Defaults: "", "admin", "twice", 10.
  std::string rados_conf;
  std::string rados_user = "admin";
  std::string rados_pool_prefix = "twice";
  int rados_op_timeout_seconds = 10;
  // Role janitor (--store=rados; storage/rados/rados_janitor.h): the lease
  // that makes it the one active janitor, seconds between its passes, the
  // age below which objects no record names are left alone (writes in
  // flight), and whether each pass reads and checks every value. The byte
  // budget it keeps is state_budget_bytes. Defaults: 30, 60, 3600, false.
  int janitor_lease_seconds = 30;
  int janitor_interval_seconds = 60;
  int janitor_grace_seconds = 3600;
  bool janitor_verify = false;
  // Prefill and decode services the orchestrator role calls, each one
  // host:port or several, comma-separated (calls are spread over them and
  // retried on another when one is unavailable). Required for role
  // orchestrator; ignored otherwise (role all calls in-process).
  std::string prefill_address;
  std::string decode_address;
  // Sync the store's WAL on every write. Default: true.
  bool sync_writes = true;
  // Byte budget of the embedded store's durable states; puts evict the
  // lowest-scoring unpinned states to stay within it. 0 = unbounded.
  // Default: 0.
  int64_t state_budget_bytes = 0;
  // Byte budget of one tenant's durable states in the embedded store: a
  // tenant's put evicts only its own lowest-scoring unpinned states to stay
  // within it, and fails with RESOURCE_EXHAUSTED when they cannot make room
  // (storage::RocksDbStoreOptions::tenant_state_budget_bytes). 0 = off.
  // Default: 0.
  int64_t tenant_state_budget_bytes = 0;
  // Free bytes the embedded store's file system must keep: below it writes
  // fail with RESOURCE_EXHAUSTED instead of filling the disk
  // (storage/disk_space_guard.h). Default: 64 MiB.
  int64_t store_min_free_disk_bytes = int64_t{64} << 20;
  // Memory of the embedded store's cache of state values (RocksDB's blob
  // cache); 0 = every read goes to the files. Default: 256 MiB.
  int64_t store_state_cache_bytes = int64_t{256} << 20;
  // Memory of the decoded-state caches of the prefill and decode services
  // (services/common/state_cache.h), each; 0 = every load reads the store.
  // Default: 256 MiB.
  int64_t state_cache_bytes = int64_t{256} << 20;
  // Memory of the orchestrator's cache of asked documents' records
  // (services/orchestrator/record_cache.h), used when the store is across
  // the network (store_address or rados): an ask starts from the cached
  // record while the current one is read, and sends nothing until that
  // read confirms it. 0 = every ask reads its record first. Unused with the
  // embedded store, whose record reads cost microseconds. Default: 16 MiB.
  int64_t ask_record_cache_bytes = int64_t{16} << 20;
  // host:port of the Prometheus endpoint (GET /metrics); port 0 picks one.
  // Empty = no endpoint. Default: empty.
  std::string metrics_listen;
  // Seconds to finish in-flight calls on shutdown before cancelling them.
  // Default: 10.
  int shutdown_grace_seconds = 10;
  // Seconds between readiness going NOT_SERVING and the server refusing
  // new calls on shutdown, so load balancers stop routing to it first.
  // Default: 0.
  int drain_delay_seconds = 0;
  // Directory `twice store backup` writes checkpoints into (role store and
  // all); put it on the store's file system so checkpoints are hard links.
  // Default: empty = DATA_DIR-backups beside the data directory.
  std::string backup_dir;
  // Seconds an internal call to a remote store may take. Default: 60.
  int store_timeout_seconds = 60;
  // Where prefill and decode run their kernels: "cpu", or "cuda" (GPU 0,
  // engine/runtime/kernel_device.h; startup fails with FAILED_PRECONDITION in a
  // build without CUDA or on a machine without a GPU). Default: "cpu".
  std::string device = "cpu";
  // --weights_dtype (engine::ParseWeightsDType): auto | f32 | bf16 | f16 |
  // int8, on either device (with --device=cuda every projection is kept on
  // the GPU as bf16, made there once from the host dtype). Default: "auto".
  std::string weights_dtype = "auto";
  // --executor: how prefill and decode run a model whose architecture has a
  // resident executor (Mamba-2; engine/executor/resident_model.h):
  // "resident" keeps its weights, workspace and sequence states on the
  // device (--device) and samples there; "offload" runs the model's own
  // forward on the kernel backend (with --device=cuda, each op copies its
  // data to the GPU and back); "auto" is resident with --device=cuda and
  // offload on the CPU. Other architectures always run as offload.
  // Default: "auto".
  std::string executor = "auto";
  // States resident at once per model (--resident_slots), at least the
  // decode batch (64); when all are taken, idle states spill to the host
  // until their next read. Default: 256.
  int resident_slots = 256;
  // Tokens of KV cache per resident full-attention model, all sequences
  // together (--resident_kv_tokens); >= 16. Default: 65536.
  int64_t resident_kv_tokens = 65536;
  // Record a resident model's decode steps as device graphs and replay
  // them (--resident_step_graphs; CUDA only). Default: true.
  bool resident_step_graphs = true;
  // Tokens per prefill pass of a resident model (--resident_prefill_chunk;
  // the activation workspace holds that many rows); 0 picks by device: 512
  // on the CPU, 4096 on a GPU. Default: 0.
  int64_t resident_prefill_chunk = 0;
  // Concurrent short reads of a resident model share prefill passes
  // (--resident_share_prefill_passes). Default: true.
  bool resident_share_prefill_passes = true;
  // The LoadOptions weights_dtype and the executor give.
  engine::LoadOptions ModelLoadOptions() const;

  // TLS of the listener and of outgoing internal calls (tls.h): the
  // listener serves TLS with tls.cert_file/key_file and requires client
  // certificates with tls.client_ca_file; outgoing calls to prefill, decode
  // and store use TLS with tls.ca_file and present the same certificate.
  // Default: all empty (plaintext).
  TlsOptions tls;
  // Listen in plaintext on a non-loopback address. Without it a server
  // with no certificate may only listen on localhost, 127.0.0.0/8 or
  // [::1]. Default: false.
  bool allow_plaintext = false;
  // Token file of public callers (services/common/auth.h): `TOKEN TENANT
  // [admin]` lines, re-read when it changes. Empty = no authentication of
  // public calls; every caller is tenant "default". Default: empty.
  std::string auth_tokens_file;
  // File holding the internal token that roles present to each other (and
  // require from each other). Role all without it, but with
  // auth_tokens_file, uses a random token generated at startup. Default:
  // empty.
  std::string internal_token_file;
  // Subject alternative names (DNS or URI, exact) of client certificates
  // that identify Twice roles on a listener with tls.client_ca_file
  // (services/common/auth.h). Any other certificate of that CA is a public
  // caller's. Default: none.
  std::vector<std::string> internal_peer_names;
  // Role all only: host:port where its internal services (Store data RPCs,
  // Prefill, Decode) also listen, for a mixed deployment whose other roles
  // call them. Same TLS as the public listener; callers must be internal
  // peers. The public listener never serves them. Default: empty (internal
  // services reachable in process only).
  std::string internal_listen;

  OrchestratorLimits orchestrator_limits;
  DecodeLimits decode_limits;
  PromptTemplates templates;

  [[nodiscard]] absl::Status Validate() const;
  // True when internal peers can be recognised: an internal token file, or
  // internal peer names on an mTLS listener.
  bool has_internal_credentials() const;
};

// "all", "orchestrator", ... ; INVALID_ARGUMENT for anything else.
[[nodiscard]] absl::Status ParseRole(std::string_view text, Role* role);
std::string_view RoleName(Role role);

}  // namespace twice::services

#endif  // TWICE_SERVICES_SERVER_SERVER_OPTIONS_H_
