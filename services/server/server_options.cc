#include "services/server/server_options.h"

#include "absl/strings/str_cat.h"
#include "services/common/tls.h"

namespace twice::services {

absl::Status ParseRole(std::string_view text, Role* role) {
  if (text == "all") {
    *role = Role::kAll;
  } else if (text == "orchestrator") {
    *role = Role::kOrchestrator;
  } else if (text == "prefill") {
    *role = Role::kPrefill;
  } else if (text == "decode") {
    *role = Role::kDecode;
  } else if (text == "store") {
    *role = Role::kStore;
  } else if (text == "janitor") {
    *role = Role::kJanitor;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown role '", std::string(text),
        "'; expected all, orchestrator, prefill, decode, store or janitor"));
  }
  return absl::OkStatus();
}

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kAll:
      return "all";
    case Role::kOrchestrator:
      return "orchestrator";
    case Role::kPrefill:
      return "prefill";
    case Role::kDecode:
      return "decode";
    case Role::kStore:
      return "store";
    case Role::kJanitor:
      return "janitor";
  }
  return "all";
}

absl::Status ServerOptions::Validate() const {
  if (listen.empty()) return absl::InvalidArgumentError("--listen is required");
  if (role == Role::kJanitor) {
    if (store != "rados") {
      return absl::InvalidArgumentError(
          "role janitor keeps a RADOS store (--store=rados); the embedded "
          "RocksDB store keeps its own budget and garbage");
    }
    if (janitor_lease_seconds <= 0 || janitor_interval_seconds <= 0 ||
        janitor_grace_seconds < 0) {
      return absl::InvalidArgumentError(
          "--janitor_lease_seconds and --janitor_interval_seconds must be > "
          "0 and --janitor_grace_seconds >= 0");
    }
  }
  if (RoleNeedsModels(role) && models.empty()) {
    return absl::InvalidArgumentError(
        "--model DIR is required (create one with `twice init-model`)");
  }
  if (role == Role::kOrchestrator &&
      (prefill_address.empty() || decode_address.empty())) {
    return absl::InvalidArgumentError(
        "role orchestrator needs --prefill_address and --decode_address");
  }
  if (store_address.find(',') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--store_address names one store role (got \"", store_address,
        "\"); Twice no longer shards documents over several stores: past "
        "one machine use --store=rados (deploy/k8s/overlays/"
        "disaggregated-ceph)"));
  }
  if (store != "rocksdb" && store != "rados") {
    return absl::InvalidArgumentError(
        absl::StrCat("--store must be rocksdb or rados, got \"", store, "\""));
  }
  if (store == "rados") {
    if (rados_conf.empty()) {
      return absl::InvalidArgumentError(
          "--store=rados needs --rados_conf (the cluster's ceph.conf)");
    }
    if (!store_address.empty()) {
      return absl::InvalidArgumentError(
          "--store=rados and --store_address exclude each other: with RADOS "
          "every role talks to the cluster directly");
    }
    if (role == Role::kStore) {
      return absl::InvalidArgumentError(
          "role store serves an embedded RocksDB store; with --store=rados "
          "no store role is needed");
    }
    if (rados_pool_prefix.empty()) {
      return absl::InvalidArgumentError("--rados_pool_prefix is empty");
    }
    if (rados_op_timeout_seconds <= 0) {
      return absl::InvalidArgumentError(
          "--rados_op_timeout_seconds must be > 0");
    }
  }
  if (store == "rocksdb" && (role == Role::kStore || store_address.empty()) &&
      data_dir.empty()) {
    return absl::InvalidArgumentError("--data_dir is required");
  }
  if (state_cache_bytes < 0) {
    return absl::InvalidArgumentError("--state_cache_bytes must be >= 0");
  }
  if (ask_record_cache_bytes < 0) {
    return absl::InvalidArgumentError("--ask_record_cache_bytes must be >= 0");
  }
  if (store_state_cache_bytes < 0) {
    return absl::InvalidArgumentError("--store_state_cache_bytes must be >= 0");
  }
  if (store_min_free_disk_bytes < 0) {
    return absl::InvalidArgumentError(
        "--store_min_free_disk_bytes must be >= 0");
  }
  if (state_budget_bytes < 0) {
    return absl::InvalidArgumentError("--state_budget_bytes must be >= 0");
  }
  if (tenant_state_budget_bytes < 0) {
    return absl::InvalidArgumentError(
        "--tenant_state_budget_bytes must be >= 0");
  }
  if (drain_delay_seconds < 0) {
    return absl::InvalidArgumentError("--drain_delay_seconds must be >= 0");
  }
  if (shutdown_grace_seconds < 0) {
    return absl::InvalidArgumentError("--shutdown_grace_seconds must be >= 0");
  }
  // "cuda" is valid here; whether this build and machine can run it is
  // decided at startup (engine/runtime/kernel_device.h: FAILED_PRECONDITION
  // otherwise).
  if (device != "cpu" && device != "cuda") {
    return absl::InvalidArgumentError("--device must be cpu or cuda, got \"" +
                                      device + "\"");
  }
  absl::StatusOr<std::optional<engine::DType>> dtype =
      engine::ParseWeightsDType(weights_dtype);
  if (!dtype.ok()) return dtype.status();
  if (executor != "auto" && executor != "offload" && executor != "resident") {
    return absl::InvalidArgumentError(
        "--executor must be auto, offload or resident, got \"" + executor +
        "\"");
  }
  // A decode step reads up to max_batch sequences at once, each in a slot.
  if (resident_slots < decode_limits.max_batch || resident_slots > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("--resident_slots must be in [", decode_limits.max_batch,
                     " (the decode batch), 65536], got ", resident_slots));
  }
  if (resident_kv_tokens < 16 || resident_kv_tokens > (int64_t{1} << 34)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--resident_kv_tokens must be in [16, 2^34], got ",
                     resident_kv_tokens));
  }
  if (resident_prefill_chunk < 0 || resident_prefill_chunk > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("--resident_prefill_chunk must be in [0, 65536] (0: by "
                     "device), got ",
                     resident_prefill_chunk));
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert and --tls_key must be given together");
  }
  if (!tls.client_ca_file.empty() && tls.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_client_ca needs --tls_cert and --tls_key (mTLS runs over TLS)");
  }
  if (!tls.server_tls() && !allow_plaintext && !IsLoopbackListen(listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing to listen in plaintext on ", listen,
        ": give --tls_cert and --tls_key, listen on a loopback address, or "
        "pass --allow_plaintext"));
  }
  if (!internal_peer_names.empty() && tls.client_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--internal_peer_names needs --tls_client_ca: the names are read "
        "from verified client certificates");
  }
  if (!internal_listen.empty() && role != Role::kAll) {
    return absl::InvalidArgumentError(
        "--internal_listen is for role all; the prefill, decode and store "
        "roles serve their internal services on --listen");
  }
  const bool any_port =
      internal_listen.size() > 2 &&
      internal_listen.compare(internal_listen.size() - 2, 2, ":0") == 0;
  if (!internal_listen.empty() && internal_listen == listen && !any_port) {
    return absl::InvalidArgumentError(
        "--internal_listen must differ from --listen: the public listener "
        "never serves the internal services");
  }
  // A listener that serves the tenant-scoped internal RPCs (which trust the
  // tenant named in the request) to anyone who can reach it would let any
  // caller read every tenant's documents. Off loopback it must recognise
  // internal peers; TLS alone (or --allow_plaintext) does not do that.
  const bool internal_role =
      role == Role::kStore || role == Role::kPrefill || role == Role::kDecode;
  auto unauthenticated_internal = [&](const std::string& address) {
    return !IsLoopbackListen(address) && !has_internal_credentials();
  };
  if ((internal_role && unauthenticated_internal(listen)) ||
      (!internal_listen.empty() && unauthenticated_internal(internal_listen))) {
    const std::string& address = internal_role ? listen : internal_listen;
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing to serve the internal services (Store, Prefill, Decode) of "
        "role ",
        std::string(RoleName(role)), " on ", address,
        " without internal credentials: give --internal_token_file, or "
        "--tls_client_ca with --internal_peer_names, or listen on a loopback "
        "address (--allow_plaintext does not waive this)"));
  }
  // Tenant tokens protect nothing if the roles this process calls accept
  // anyone: calls to other processes must carry an internal credential.
  const bool calls_other_processes =
      role == Role::kOrchestrator ||
      (role != Role::kStore && !store_address.empty());
  if (calls_other_processes && !auth_tokens_file.empty() &&
      internal_token_file.empty() &&
      (tls.ca_file.empty() || tls.cert_file.empty())) {
    return absl::InvalidArgumentError(
        "--auth_tokens_file with remote prefill, decode or store roles needs "
        "--internal_token_file or client certificates (--tls_ca, --tls_cert, "
        "--tls_key) to call them");
  }
  if (!internal_listen.empty() && !tls.server_tls() && !allow_plaintext &&
      !IsLoopbackListen(internal_listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing to listen in plaintext on ", internal_listen,
        " (--internal_listen): give --tls_cert and --tls_key, listen on a "
        "loopback address, or pass --allow_plaintext"));
  }
  if (orchestrator_limits.max_document_tokens <= 0 ||
      orchestrator_limits.max_question_tokens <= 0 ||
      decode_limits.max_new_tokens <= 0) {
    return absl::InvalidArgumentError("limits must be positive");
  }
  if (orchestrator_limits.max_pinned_documents_per_tenant < 0) {
    return absl::InvalidArgumentError(
        "--max_pinned_documents_per_tenant must not be negative (0 = no "
        "limit)");
  }
  if (orchestrator_limits.max_segments_per_document <= 0) {
    return absl::InvalidArgumentError(
        "--max_segments_per_document must be positive");
  }
  const TenantLimits& tenants = orchestrator_limits.tenants;
  if (tenants.max_concurrent_calls < 0 ||
      tenants.max_concurrent_calls_per_tenant < 0 ||
      tenants.max_ingest_tokens_per_minute < 0) {
    return absl::InvalidArgumentError(
        "tenant limits must not be negative (0 = no limit)");
  }
  return absl::OkStatus();
}

bool ServerOptions::has_internal_credentials() const {
  return !internal_token_file.empty() ||
         (!internal_peer_names.empty() && !tls.client_ca_file.empty());
}

engine::LoadOptions ServerOptions::ModelLoadOptions() const {
  engine::LoadOptions load;
  absl::StatusOr<std::optional<engine::DType>> dtype =
      engine::ParseWeightsDType(weights_dtype);
  if (dtype.ok()) load.weights_dtype = *dtype;  // Validate reported errors
  load.resident =
      executor == "resident" || (executor == "auto" && device == "cuda");
  load.resident_device = device;
  load.resident_slots = resident_slots;
  load.resident_kv_tokens = resident_kv_tokens;
  load.resident_step_graphs = resident_step_graphs;
  load.resident_prefill_chunk = resident_prefill_chunk;
  load.resident_share_prefill_passes = resident_share_prefill_passes;
  return load;
}

}  // namespace twice::services
