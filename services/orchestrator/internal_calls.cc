#include "services/orchestrator/internal_calls.h"

#include <grpcpp/client_context.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/common/proto_convert.h"
#include "services/common/request_id.h"
#include "services/store/store_service.h"

namespace twice::services {

namespace {

absl::StatusOr<PrefillOutcome> PrefillAttempt(
    v1::Prefill::StubInterface& stub, const grpc::ServerContext& parent,
    const PrefillCall& call, absl::Span<const int32_t> tokens,
    const std::function<void(const v1::PrefillResponse&)>& on_progress) {
  std::unique_ptr<grpc::ClientContext> context =
      grpc::ClientContext::FromServerContext(parent);
  AttachRequestId(*context, &parent);
  auto stream = stub.Prefill(context.get());

  // Tokens are written from a second thread while this one reads progress,
  // so neither side's flow-control window can stall the other.
  std::thread writer([&] {
    v1::PrefillRequest request;
    v1::PrefillHeader* header = request.mutable_header();
    header->set_model(call.model);
    header->set_tenant(call.tenant);
    header->set_document_id(call.document_id);
    if (call.parent) *header->mutable_parent() = ToProto(*call.parent);
    header->set_mode(call.mode);
    header->set_checkpoint_tokens(call.checkpoint_tokens);
    header->mutable_checkpoint_at()->Add(call.checkpoint_at.begin(),
                                         call.checkpoint_at.end());
    header->set_total_tokens(static_cast<int64_t>(tokens.size()));
    const int64_t total = static_cast<int64_t>(tokens.size());
    int64_t offset = 0;
    do {
      const int64_t end = std::min(total, offset + kTokenChunk);
      request.mutable_tokens()->Add(tokens.begin() + offset,
                                    tokens.begin() + end);
      if (!stream->Write(request)) break;
      request.Clear();
      offset = end;
    } while (offset < total);
    stream->WritesDone();
  });

  PrefillOutcome outcome;
  v1::PrefillResponse response;
  bool done = false;
  // A key that does not parse would leave a hole in the document's chain:
  // the call fails rather than record a shorter one.
  absl::Status malformed;
  auto parse = [&](const v1::StateKey& wire,
                   const char* what) -> std::optional<storage::StateKey> {
    absl::StatusOr<storage::StateKey> key = FromProto(wire);
    if (key.ok()) return *key;
    if (malformed.ok()) {
      malformed = absl::InternalError(
          absl::StrCat("prefill returned a malformed ", what,
                       " key: ", key.status().message()));
    }
    return std::nullopt;
  };
  while (malformed.ok() && stream->Read(&response)) {
    for (const v1::SegmentBoundary& checkpoint : response.checkpoints()) {
      std::optional<storage::StateKey> key =
          parse(checkpoint.state_key(), "checkpoint");
      if (key) outcome.checkpoints.push_back({checkpoint.end_token(), *key});
    }
    outcome.checkpoints_reused += response.checkpoints_reused();
    outcome.tokens_computed = response.tokens_computed();
    outcome.states_recomputed = response.states_recomputed();
    if (response.done()) {
      std::optional<storage::StateKey> key =
          parse(response.final_state(), "final state");
      if (key) outcome.final_state = *key;
      done = true;
    }
    if (malformed.ok() && on_progress) on_progress(response);
  }
  if (!malformed.ok()) context->TryCancel();
  writer.join();
  absl::Status status = FromGrpcStatus(stream->Finish());
  if (!malformed.ok()) return malformed;
  if (!status.ok()) return status;
  if (!done) return absl::InternalError("prefill ended without a result");
  return outcome;
}

absl::StatusOr<GenerateOutcome> GenerateAttempt(
    v1::Decode::StubInterface& stub, const grpc::ServerContext& parent,
    const v1::GenerateRequest& request,
    const std::function<bool(const v1::GenerateResponse&)>& on_piece,
    bool& committed) {
  std::unique_ptr<grpc::ClientContext> context =
      grpc::ClientContext::FromServerContext(parent);
  AttachRequestId(*context, &parent);
  auto reader = stub.Generate(context.get(), request);
  GenerateOutcome outcome;
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    if (response.finished()) {
      outcome.final = response;
      continue;
    }
    outcome.produced_output = true;
    committed = true;
    if (!on_piece(response)) {
      context->TryCancel();
      break;
    }
  }
  absl::Status status = FromGrpcStatus(reader->Finish());
  if (!status.ok()) return status;
  if (!outcome.final.finished()) {
    return absl::CancelledError("generation cancelled");
  }
  return outcome;
}

}  // namespace

absl::StatusOr<PrefillOutcome> CallPrefill(
    PrefillPool& pool, const grpc::ServerContext& parent,
    const PrefillCall& call, absl::Span<const int32_t> tokens,
    const std::function<void(const v1::PrefillResponse&)>& on_progress) {
  return pool.RunWithRetry<PrefillOutcome>(
      "prefill", [&](v1::Prefill::StubInterface& stub, bool& /*committed*/) {
        return PrefillAttempt(stub, parent, call, tokens, on_progress);
      });
}

absl::StatusOr<std::vector<v1::ModelInfo>> CallDescribeModels(
    PrefillPool& pool, std::chrono::milliseconds timeout) {
  return pool.RunWithRetry<std::vector<v1::ModelInfo>>(
      "prefill",
      [&](v1::Prefill::StubInterface& stub,
          bool& /*committed*/) -> absl::StatusOr<std::vector<v1::ModelInfo>> {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + timeout);
        AttachRequestId(context, nullptr);
        v1::DescribeModelsResponse response;
        absl::Status status = FromGrpcStatus(stub.DescribeModels(
            &context, v1::DescribeModelsRequest(), &response));
        if (!status.ok()) return status;
        return std::vector<v1::ModelInfo>(response.models().begin(),
                                          response.models().end());
      });
}

absl::StatusOr<GenerateOutcome> CallGenerate(
    DecodePool& pool, const grpc::ServerContext& parent,
    const v1::GenerateRequest& request,
    const std::function<bool(const v1::GenerateResponse&)>& on_piece,
    std::optional<size_t> preferred) {
  return pool.RunWithRetry<GenerateOutcome>(
      "decode",
      [&](v1::Decode::StubInterface& stub, bool& committed) {
        return GenerateAttempt(stub, parent, request, on_piece, committed);
      },
      preferred);
}

}  // namespace twice::services
