// Client side of the orchestrator's calls to the prefill and decode
// services. In role `all` the stubs run over an in-process channel; in a
// disaggregated deployment over the network. Deadline and cancellation of
// the public call propagate to the internal one.
#ifndef TWICE_SERVICES_ORCHESTRATOR_INTERNAL_CALLS_H_
#define TWICE_SERVICES_ORCHESTRATOR_INTERNAL_CALLS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/server_context.h>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "storage/document_record.h"
#include "storage/state_key.h"
#include "twice/v1/decode.grpc.pb.h"
#include "twice/v1/prefill.grpc.pb.h"

namespace twice::services {

struct PrefillCall {
  std::string model;
  std::string tenant;
  std::optional<storage::StateKey> parent;
  v1::PrefillMode mode = v1::PREFILL_MODE_CAUSAL;
  int64_t checkpoint_tokens = 0;
  bool ephemeral = false;
};

struct PrefillOutcome {
  std::vector<storage::SegmentBoundary> checkpoints;  // end_token of this call
  storage::StateKey final_state;
  int64_t checkpoints_reused = 0;
  int64_t tokens_computed = 0;
  int64_t states_recomputed = 0;
};

// Streams `tokens` to the prefill service; `on_progress` sees every response.
[[nodiscard]] absl::StatusOr<PrefillOutcome> CallPrefill(
    v1::Prefill::StubInterface& stub, const grpc::ServerContext& parent,
    const PrefillCall& call, absl::Span<const int32_t> tokens,
    const std::function<void(const v1::PrefillResponse&)>& on_progress);

struct GenerateOutcome {
  v1::GenerateResponse final;  // the message with `finished`
  bool produced_output = false;
};

// Runs a generation; `on_piece` sees every non-final message and returns
// false when the public caller is gone.
[[nodiscard]] absl::StatusOr<GenerateOutcome> CallGenerate(
    v1::Decode::StubInterface& stub, const grpc::ServerContext& parent,
    const v1::GenerateRequest& request,
    const std::function<bool(const v1::GenerateResponse&)>& on_piece);

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_INTERNAL_CALLS_H_
