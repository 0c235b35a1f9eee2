#include "services/server/server_options.h"

#include "absl/strings/str_cat.h"

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
  if (state_budget_bytes < 0) {
    return absl::InvalidArgumentError("--state_budget_bytes must be >= 0");
  }
  if (drain_delay_seconds < 0) {
    return absl::InvalidArgumentError("--drain_delay_seconds must be >= 0");
  }
  if (shutdown_grace_seconds < 0) {
    return absl::InvalidArgumentError("--shutdown_grace_seconds must be >= 0");
  }
  if (device == "cuda") {
    return absl::UnimplementedError(
        "--device=cuda: not available yet. The CUDA kernels are built "
        "(twice_kernels_cuda, when compiled with TWICE_WITH_CUDA), but the "
        "engine runs its layers on host memory: running a model on the GPU "
        "needs device tensors in engine/ (weights uploaded once, "
        "device-resident layer states, a device-side forward per layer), "
        "which are missing. Use --device=cpu.");
  }
  if (device != "cpu") {
    return absl::InvalidArgumentError("--device must be cpu or cuda, got \"" +
                                      device + "\"");
  }
  if (orchestrator_limits.max_document_tokens <= 0 ||
      orchestrator_limits.max_question_tokens <= 0 ||
      decode_limits.max_new_tokens <= 0) {
    return absl::InvalidArgumentError("limits must be positive");
  }
  return absl::OkStatus();
}

}  // namespace twice::services
