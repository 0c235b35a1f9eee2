// Client side of the orchestrator's calls to the prefill and decode
// services. In role `all` the stubs run over an in-process channel; in a
// disaggregated deployment over the network, spread over the endpoints of a
// pool and retried on another endpoint when one is unavailable
// (endpoint_pool.h). Deadline and cancellation of the public call propagate
// to every internal attempt.
#ifndef TWICE_SERVICES_ORCHESTRATOR_INTERNAL_CALLS_H_
#define TWICE_SERVICES_ORCHESTRATOR_INTERNAL_CALLS_H_

#include <grpcpp/server_context.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "services/orchestrator/endpoint_pool.h"
#include "storage/document_record.h"
#include "storage/state_key.h"
#include "twice/v1/decode.grpc.pb.h"
#include "twice/v1/prefill.grpc.pb.h"

namespace twice::services {

struct PrefillCall {
  std::string model;
  std::string tenant;
  // Document the states belong to (routes them to its store replica).
  std::string document_id;
  std::optional<storage::StateKey> parent;
  v1::PrefillMode mode = v1::PREFILL_MODE_CAUSAL;
  int64_t checkpoint_tokens = 0;
  // Explicit checkpoints (tokens of this call), instead of
  // checkpoint_tokens; see PrefillHeader.checkpoint_at.
  std::vector<int64_t> checkpoint_at;
};

using PrefillPool = EndpointPool<v1::Prefill::StubInterface>;
using DecodePool = EndpointPool<v1::Decode::StubInterface>;

struct PrefillOutcome {
  std::vector<storage::SegmentBoundary> checkpoints;  // end_token of this call
  storage::StateKey final_state;
  int64_t checkpoints_reused = 0;
  int64_t tokens_computed = 0;
  int64_t states_recomputed = 0;
};

// Streams `tokens` to a prefill endpoint of `pool`; `on_progress` sees every
// response (of the attempt that runs; a retried call starts over).
[[nodiscard]] absl::StatusOr<PrefillOutcome> CallPrefill(
    PrefillPool& pool, const grpc::ServerContext& parent,
    const PrefillCall& call, absl::Span<const int32_t> tokens,
    const std::function<void(const v1::PrefillResponse&)>& on_progress);

// The models the prefill endpoints serve (Prefill.DescribeModels), asked of
// one endpoint of `pool` with a deadline of `timeout`.
[[nodiscard]] absl::StatusOr<std::vector<v1::ModelInfo>> CallDescribeModels(
    PrefillPool& pool, std::chrono::milliseconds timeout);

struct GenerateOutcome {
  v1::GenerateResponse final;  // the message with `finished`
  bool produced_output = false;
};

// Runs a generation on a decode endpoint of `pool` (`preferred` first when
// given); `on_piece` sees every non-final message and returns false when the
// public caller is gone. Retried elsewhere only before the first piece.
[[nodiscard]] absl::StatusOr<GenerateOutcome> CallGenerate(
    DecodePool& pool, const grpc::ServerContext& parent,
    const v1::GenerateRequest& request,
    const std::function<bool(const v1::GenerateResponse&)>& on_piece,
    std::optional<size_t> preferred = std::nullopt);

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_INTERNAL_CALLS_H_
