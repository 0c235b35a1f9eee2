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
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown role '", std::string(text),
        "'; expected all, orchestrator, prefill, decode or store"));
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
  }
  return "all";
}

absl::Status ServerOptions::Validate() const {
  if (listen.empty()) return absl::InvalidArgumentError("--listen is required");
  if (role != Role::kStore && models.empty()) {
    return absl::InvalidArgumentError(
        "--model DIR is required (create one with `twice init-model`)");
  }
  if (role == Role::kOrchestrator &&
      (prefill_address.empty() || decode_address.empty())) {
    return absl::InvalidArgumentError(
        "role orchestrator needs --prefill_address and --decode_address");
  }
  if ((role == Role::kStore || store_address.empty()) && data_dir.empty()) {
    return absl::InvalidArgumentError("--data_dir is required");
  }
  if (state_cache_bytes < 0) {
    return absl::InvalidArgumentError("--state_cache_bytes must be >= 0");
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
  if (orchestrator_limits.max_document_tokens <= 0 ||
      orchestrator_limits.max_question_tokens <= 0 ||
      decode_limits.max_new_tokens <= 0) {
    return absl::InvalidArgumentError("limits must be positive");
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

}  // namespace twice::services
