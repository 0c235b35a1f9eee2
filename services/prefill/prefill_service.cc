#include "services/prefill/prefill_service.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/common/log.h"
#include "services/common/proto_convert.h"
#include "services/prefill/prefill_run.h"
#include "services/store/store_metrics.h"

namespace twice::services {

grpc::Status PrefillService::DescribeModels(
    grpc::ServerContext* context, const v1::DescribeModelsRequest* /*request*/,
    v1::DescribeModelsResponse* response) {
  if (absl::Status auth = AuthorizeInternal(auth_, *context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  for (const std::string& name : models_->names()) {
    *response->add_models() = models_->Describe(name);
  }
  response->set_default_model(models_->default_name());
  return grpc::Status::OK;
}

grpc::Status PrefillService::Prefill(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::PrefillResponse, v1::PrefillRequest>* stream) {
  if (absl::Status auth = AuthorizeInternal(auth_, *context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  const auto started = std::chrono::steady_clock::now();
  v1::PrefillRequest request;
  if (!stream->Read(&request) || !request.has_header()) {
    return InvalidRequest("Prefill: the first message must carry the header");
  }
  const v1::PrefillHeader header = request.header();
  absl::StatusOr<const engine::Model*> model = models_->Find(header.model());
  if (!model.ok()) return ToGrpcStatus(model.status());
  if (header.tenant().empty())
    return InvalidRequest("Prefill: tenant is required");
  if (header.total_tokens() <= 0) {
    return InvalidRequest("Prefill: total_tokens must be positive");
  }
  if (header.checkpoint_tokens() < 0) {
    return InvalidRequest("Prefill: checkpoint_tokens must not be negative");
  }
  PrefillRunOptions options;
  options.tenant = header.tenant();
  absl::StatusOr<engine::PrefillMode> mode = FromProto(header.mode());
  if (!mode.ok()) return ToGrpcStatus(mode.status());
  options.mode = *mode;
  const int64_t prefix_length = (*model)->description().prefix_length;
  if (options.mode == engine::PrefillMode::kPrefix && prefix_length <= 0) {
    return ToGrpcStatus(absl::UnimplementedError(
        absl::StrCat("Prefill: model '", models_->Resolve(header.model()),
                     "' has no prefix encoder; PREFILL_MODE_PREFIX needs a "
                     "JRT-RNN model")));
  }
  if (header.has_parent()) {
    absl::StatusOr<storage::StateKey> parent = FromProto(header.parent());
    if (!parent.ok()) return ToGrpcStatus(parent.status());
    options.parent = *parent;
  }
  const int64_t total = header.total_tokens();
  const std::vector<int64_t> checkpoint_at(header.checkpoint_at().begin(),
                                           header.checkpoint_at().end());
  if (!checkpoint_at.empty()) {
    for (size_t i = 0; i < checkpoint_at.size(); ++i) {
      const int64_t previous = i == 0 ? 0 : checkpoint_at[i - 1];
      if (checkpoint_at[i] <= previous) {
        return InvalidRequest(
            "Prefill: checkpoint_at must be strictly increasing "
            "and positive");
      }
    }
    if (checkpoint_at.back() != total) {
      return InvalidRequest(absl::StrCat(
          "Prefill: the last checkpoint_at (", checkpoint_at.back(),
          ") must equal total_tokens (", total, ")"));
    }
    // A prefix chain's encoder is its whole first segment (see below).
    if (options.mode == engine::PrefillMode::kPrefix && !options.parent &&
        checkpoint_at.front() < std::min(total, prefix_length)) {
      return InvalidRequest(absl::StrCat(
          "Prefill: a prefix read's first checkpoint must cover the encoder (",
          prefix_length, " tokens) or all tokens"));
    }
  }
  const int64_t segment =
      header.checkpoint_tokens() == 0 ? total : header.checkpoint_tokens();
  // A prefix chain's encoder is its first segment read from the root: make
  // it the whole encoder (M tokens) or the whole input, whatever the
  // checkpoint size, so the same tokens always get the same encoding.
  const int64_t first_segment =
      options.mode == engine::PrefillMode::kPrefix && !options.parent
          ? std::max(segment, prefix_length)
          : segment;
  // The end of the segment that starts after `consumed` tokens.
  size_t next_checkpoint = 0;
  auto segment_end = [&](int64_t consumed) -> int64_t {
    if (!checkpoint_at.empty()) {
      while (next_checkpoint < checkpoint_at.size() &&
             checkpoint_at[next_checkpoint] <= consumed) {
        ++next_checkpoint;
      }
      return next_checkpoint < checkpoint_at.size()
                 ? checkpoint_at[next_checkpoint]
                 : total;
    }
    return std::min(total,
                    consumed + (consumed == 0 ? first_segment : segment));
  };
  options.cache = &cache_;
  PrefillRun run(**model, *store_, options);

  std::vector<int32_t> buffer(request.tokens().begin(), request.tokens().end());
  if (static_cast<int64_t>(buffer.size()) > total) {
    return InvalidRequest(
        absl::StrCat("Prefill: stream carries more than ", total, " tokens"));
  }
  int64_t consumed = 0;  // tokens of this call already run as segments
  bool more = true;
  while (true) {
    // Run every whole segment buffered so far; the last one may be short.
    while (true) {
      const int64_t want = segment_end(consumed) - consumed;
      const int64_t have = static_cast<int64_t>(buffer.size());
      if (want == 0 || have < want) break;
      if (context->IsCancelled()) {
        return ToGrpcStatus(absl::CancelledError("Prefill cancelled"));
      }
      absl::StatusOr<SegmentResult> result = run.RunSegment(
          absl::MakeConstSpan(buffer.data(), static_cast<size_t>(want)));
      if (!result.ok()) return ToGrpcStatus(result.status());
      buffer.erase(buffer.begin(), buffer.begin() + want);
      consumed += want;
      v1::PrefillResponse response;
      v1::SegmentBoundary* checkpoint = response.add_checkpoints();
      checkpoint->set_end_token(consumed);
      *checkpoint->mutable_state_key() = ToProto(result->key);
      response.set_checkpoints_reused(result->reused ? 1 : 0);
      response.set_tokens_done(consumed);
      response.set_tokens_computed(run.tokens_computed());
      const double seconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - started)
                                 .count();
      response.set_tokens_per_second(
          seconds > 0 ? static_cast<double>(run.tokens_computed()) / seconds
                      : 0.0);
      response.set_states_recomputed(run.states_recomputed());
      if (!stream->Write(response)) {
        return ToGrpcStatus(absl::CancelledError("Prefill: client went away"));
      }
    }
    if (!more) break;
    if (!stream->Read(&request)) {
      more = false;
      continue;
    }
    if (consumed + static_cast<int64_t>(buffer.size()) + request.tokens_size() >
        total) {
      return InvalidRequest(
          absl::StrCat("Prefill: stream carries more than ", total, " tokens"));
    }
    buffer.insert(buffer.end(), request.tokens().begin(),
                  request.tokens().end());
  }
  if (consumed != total) {
    return InvalidRequest(
        absl::StrCat("Prefill: stream ended after ",
                     consumed + static_cast<int64_t>(buffer.size()), " of ",
                     total, " tokens"));
  }
  v1::PrefillResponse done;
  done.set_done(true);
  done.set_tokens_done(consumed);
  done.set_tokens_computed(run.tokens_computed());
  done.set_states_recomputed(run.states_recomputed());
  *done.mutable_final_state() = ToProto(run.current_key());
  stream->Write(done);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  ServingMetrics::Process().AddPrefilledTokens(
      run.tokens_computed(),
      seconds > 0 ? static_cast<double>(run.tokens_computed()) / seconds : 0);
  Log(LogLevel::kInfo, "prefill.done",
      absl::StrCat("tenant=", LogValue(header.tenant()), " tokens=", consumed,
                   " computed=", run.tokens_computed(),
                   " recomputed_states=", run.states_recomputed()));
  return grpc::Status::OK;
}

}  // namespace twice::services
