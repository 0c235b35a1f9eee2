#include "services/decode/decode_service.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/common/proto_convert.h"
#include "services/store/store_metrics.h"

namespace twice::services {
DecodeService::DecodeService(const ModelRegistry* models, storage::Store* store,
                             DecodeLimits limits)
    : models_(models),
      store_(store),
      limits_(limits),
      cache_(limits.state_cache_bytes) {
  engine::DecodeLoopOptions options;
  options.max_batch = limits_.max_batch;
  for (const std::string& name : models_->names()) {
    absl::StatusOr<const engine::Model*> model = models_->Find(name);
    if (model.ok()) {
      loops_.emplace(name,
                     std::make_unique<engine::DecodeLoop>(**model, options));
    }
  }
}

DecodeService::~DecodeService() = default;

absl::Status DecodeService::ReadInChunks(
    const engine::Model& model, absl::Span<const int32_t> tokens,
    engine::PrefillMode mode, engine::SequenceState& state,
    const grpc::ServerContext& context) const {
  const size_t chunk =
      static_cast<size_t>(std::max<int64_t>(1, limits_.read_chunk_tokens));
  const size_t encoder = static_cast<size_t>(
      std::max<int64_t>(0, model.description().prefix_length));
  for (size_t begin = 0; begin < tokens.size();) {
    size_t n = std::min(chunk, tokens.size() - begin);
    const bool first = begin == 0;
    if (first && engine::IsPrefixMode(mode)) {
      n = std::min(tokens.size(), std::max(n, encoder));
    }
    absl::StatusOr<std::vector<float>> logits =
        model.Prefill(tokens.subspan(begin, n), state,
                      first ? mode : engine::PrefillMode::kCausal);
    if (!logits.ok()) return logits.status();
    begin += n;
    if (context.IsCancelled()) {
      return absl::CancelledError("Generate cancelled");
    }
  }
  return absl::OkStatus();
}

grpc::Status DecodeService::Generate(
    grpc::ServerContext* context, const v1::GenerateRequest* request,
    grpc::ServerWriter<v1::GenerateResponse>* writer) {
  if (absl::Status auth = AuthorizeInternal(auth_, *context); !auth.ok()) {
    return ToGrpcStatus(auth);
  }
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<const engine::Model*> model = models_->Find(request->model());
  if (!model.ok()) return ToGrpcStatus(model.status());
  auto loop = loops_.find(models_->Resolve(request->model()));
  if (loop == loops_.end()) {
    return ToGrpcStatus(absl::InternalError("no decode loop for model"));
  }
  if (request->tenant().empty())
    return InvalidRequest("Generate: tenant is required");
  if (request->prompt_tokens_size() == 0) {
    return InvalidRequest("Generate: the prompt must hold at least one token");
  }
  if (request->prompt_tokens_size() > limits_.max_prompt_tokens) {
    return InvalidRequest(
        absl::StrCat("Generate: prompt has ", request->prompt_tokens_size(),
                     " tokens; the limit is ", limits_.max_prompt_tokens));
  }
  if (request->read_tokens_size() > limits_.max_read_tokens) {
    return InvalidRequest(
        absl::StrCat("Generate: read_tokens has ", request->read_tokens_size(),
                     " tokens; the limit is ", limits_.max_read_tokens));
  }
  absl::StatusOr<engine::PrefillMode> read_mode =
      FromProto(request->read_mode());
  if (!read_mode.ok()) return ToGrpcStatus(read_mode.status());
  if (engine::IsPrefixMode(*read_mode) && request->has_state()) {
    return InvalidRequest(
        "Generate: read_mode PREFILL_MODE_PREFIX encodes from the empty "
        "state; the request names a state");
  }

  const v1::SamplingOptions& sampling = request->sampling();
  engine::GenerateOptions options;
  options.sampling.temperature = sampling.temperature();
  options.sampling.top_k = sampling.top_k();
  options.sampling.top_p = sampling.top_p() == 0.0f ? 1.0f : sampling.top_p();
  options.sampling.seed = sampling.seed();
  if (sampling.max_tokens() < 0 ||
      sampling.max_tokens() > limits_.max_new_tokens) {
    return InvalidRequest(absl::StrCat("max_tokens must be in [0, ",
                                       limits_.max_new_tokens, "], got ",
                                       sampling.max_tokens()));
  }
  options.max_tokens = sampling.max_tokens() == 0 ? limits_.default_max_tokens
                                                  : sampling.max_tokens();
  options.stop_at_eos = !sampling.ignore_eos();
  options.stop.assign(sampling.stop().begin(), sampling.stop().end());
  absl::Status valid = engine::ValidateGenerateOptions(options);
  if (!valid.ok()) return ToGrpcStatus(valid);

  std::unique_ptr<engine::SequenceState> state;
  if (request->has_state()) {
    absl::StatusOr<storage::StateKey> key = FromProto(request->state());
    if (!key.ok()) return ToGrpcStatus(key.status());
    // Document states go through the cache: concurrent questions on one
    // document share one load.
    absl::StatusOr<std::unique_ptr<engine::SequenceState>> loaded =
        cache_.Load(*store_, **model, *key);
    if (!loaded.ok()) return ToGrpcStatus(loaded.status());
    state = *std::move(loaded);
  } else {
    state = (*model)->NewState();
  }

  // The read tokens and the prompt are read here, on the handler thread, so
  // a long read never holds up the other sequences' next tokens in the loop.
  absl::Status read = ReadInChunks(**model, request->read_tokens(), *read_mode,
                                   *state, *context);
  if (!read.ok()) return ToGrpcStatus(read);
  const std::vector<int32_t> prompt(request->prompt_tokens().begin(),
                                    request->prompt_tokens().end());
  absl::StatusOr<std::vector<float>> logits =
      (*model)->Prefill(prompt, *state, engine::PrefillMode::kCausal);
  if (!logits.ok()) return ToGrpcStatus(logits.status());
  if (context->IsCancelled()) {
    return ToGrpcStatus(absl::CancelledError("Generate cancelled"));
  }
  absl::StatusOr<std::shared_ptr<engine::DecodeStream>> stream =
      loop->second->Submit(std::move(state), *std::move(logits), options,
                           [context] { return context->IsCancelled(); });
  if (!stream.ok()) return ToGrpcStatus(stream.status());

  double ttft_ms = -1;
  engine::DecodeEvent event;
  while ((*stream)->Next(&event)) {
    if (event.finished) break;
    if (ttft_ms < 0) {
      ttft_ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - started)
                    .count();
    }
    v1::GenerateResponse response;
    response.mutable_tokens()->Add(event.piece.tokens.begin(),
                                   event.piece.tokens.end());
    response.set_text(event.piece.text);
    // A failed write means the caller is gone: stop decoding, but keep
    // draining so the loop's last event is consumed.
    if (!writer->Write(response)) (*stream)->Cancel();
  }
  if (!event.status.ok()) return ToGrpcStatus(event.status);
  if (event.result.finish_reason == "cancelled" || context->IsCancelled()) {
    return ToGrpcStatus(absl::CancelledError("Generate cancelled"));
  }
  v1::GenerateResponse done;
  // The final piece (text flushed at the end) rides on the finished message.
  done.mutable_tokens()->Add(event.piece.tokens.begin(),
                             event.piece.tokens.end());
  done.set_text(event.piece.text);
  done.set_finished(true);
  done.set_finish_reason(event.result.finish_reason);
  const int64_t read_tokens =
      static_cast<int64_t>(request->read_tokens_size() + prompt.size());
  done.set_tokens_prefilled(read_tokens);
  done.set_tokens_decoded(event.result.tokens_decoded);
  done.set_ttft_ms(ttft_ms < 0 ? 0 : ttft_ms);
  writer->Write(done);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  ServingMetrics& metrics = ServingMetrics::Process();
  if (ttft_ms >= 0) metrics.ObserveDecodeTtft(ttft_ms / 1000.0);
  metrics.AddDecodeReadTokens(read_tokens);
  metrics.AddDecodedTokens(
      event.result.tokens_decoded,
      seconds > 0 ? static_cast<double>(event.result.tokens_decoded) / seconds
                  : 0);
  return grpc::Status::OK;
}

grpc::Status DecodeService::Stats(grpc::ServerContext* context,
                                  const v1::DecodeStatsRequest* /*request*/,
                                  v1::DecodeStats* response) {
  // The metrics gauge reads the stats in process, without a call.
  if (context != nullptr) {
    if (absl::Status auth = AuthorizeInternal(auth_, *context); !auth.ok()) {
      return ToGrpcStatus(auth);
    }
  }
  for (const auto& [name, loop] : loops_) {
    const engine::DecodeLoopStats stats = loop->stats();
    response->set_steps(response->steps() + stats.steps);
    response->set_tokens_decoded(response->tokens_decoded() +
                                 stats.tokens_decoded);
    response->set_sequences_started(response->sequences_started() +
                                    stats.sequences_started);
    response->set_sequences_cancelled(response->sequences_cancelled() +
                                      stats.sequences_cancelled);
    response->set_active_sequences(response->active_sequences() + stats.active);
    response->set_max_batch(std::max(response->max_batch(), stats.max_batch));
  }
  response->set_state_cache_hits(cache_.hits());
  response->set_state_cache_misses(cache_.misses());
  return grpc::Status::OK;
}

}  // namespace twice::services
