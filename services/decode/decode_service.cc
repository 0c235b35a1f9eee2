#include "services/decode/decode_service.h"

#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/runtime/generator.h"
#include "services/common/grpc_status.h"
#include "services/common/proto_convert.h"
#include "services/common/state_io.h"

namespace twice::services {
namespace {

grpc::Status Invalid(std::string message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::move(message));
}

}  // namespace

grpc::Status DecodeService::Generate(
    grpc::ServerContext* context, const v1::GenerateRequest* request,
    grpc::ServerWriter<v1::GenerateResponse>* writer) {
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<const engine::Model*> model = models_->Find(request->model());
  if (!model.ok()) return ToGrpcStatus(model.status());
  if (request->tenant().empty()) return Invalid("Generate: tenant is required");
  if (request->prompt_tokens_size() == 0) {
    return Invalid("Generate: the prompt must hold at least one token");
  }
  if (request->prompt_tokens_size() > limits_.max_prompt_tokens) {
    return Invalid(absl::StrCat("Generate: prompt has ",
                                request->prompt_tokens_size(),
                                " tokens; the limit is ",
                                limits_.max_prompt_tokens));
  }

  const v1::SamplingOptions& sampling = request->sampling();
  engine::GenerateOptions options;
  options.sampling.temperature = sampling.temperature();
  options.sampling.top_k = sampling.top_k();
  options.sampling.top_p = sampling.top_p() == 0.0f ? 1.0f : sampling.top_p();
  options.sampling.seed = sampling.seed();
  absl::Status valid = options.sampling.Validate();
  if (!valid.ok()) return ToGrpcStatus(valid);
  if (sampling.max_tokens() < 0 || sampling.max_tokens() > limits_.max_new_tokens) {
    return Invalid(absl::StrCat("max_tokens must be in [0, ",
                                limits_.max_new_tokens, "], got ",
                                sampling.max_tokens()));
  }
  options.max_tokens = sampling.max_tokens() == 0 ? limits_.default_max_tokens
                                                  : sampling.max_tokens();
  options.stop_at_eos = !sampling.ignore_eos();
  options.stop.assign(sampling.stop().begin(), sampling.stop().end());

  std::unique_ptr<engine::SequenceState> state;
  if (request->has_state()) {
    absl::StatusOr<storage::StateKey> key = FromProto(request->state());
    if (!key.ok()) return ToGrpcStatus(key.status());
    absl::StatusOr<std::unique_ptr<engine::SequenceState>> loaded =
        LoadState(*store_, **model, *key, request->ephemeral());
    if (!loaded.ok()) return ToGrpcStatus(loaded.status());
    state = *std::move(loaded);
  } else {
    state = (*model)->NewState();
  }

  const std::vector<int32_t> prompt(request->prompt_tokens().begin(),
                                    request->prompt_tokens().end());
  double ttft_ms = -1;
  bool client_gone = false;
  absl::StatusOr<engine::GenerateResult> result = engine::Generate(
      **model, *state, prompt, options,
      [&](const engine::GeneratedPiece& piece) {
        if (context->IsCancelled()) return false;
        if (ttft_ms < 0) {
          ttft_ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - started)
                        .count();
        }
        v1::GenerateResponse response;
        response.mutable_tokens()->Add(piece.tokens.begin(), piece.tokens.end());
        response.set_text(piece.text);
        if (!writer->Write(response)) {
          client_gone = true;
          return false;
        }
        return true;
      });
  if (!result.ok()) return ToGrpcStatus(result.status());
  if (client_gone || context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "Generate cancelled");
  }
  v1::GenerateResponse done;
  done.set_finished(true);
  done.set_finish_reason(result->finish_reason);
  done.set_tokens_prefilled(result->tokens_prefilled);
  done.set_tokens_decoded(result->tokens_decoded);
  done.set_ttft_ms(ttft_ms < 0 ? 0 : ttft_ms);
  writer->Write(done);
  return grpc::Status::OK;
}

}  // namespace twice::services
