// The ask half of the orchestrator: each mode's recipe, as the token
// sequence it feeds and the state it starts from (common.proto AskMode):
//
//   mode                   start                      fed (read on decode)
//   default                document state             -
//   read_twice             document state             preamble, document
//   read_twice_full        empty                      preamble, doc, sep, doc
//   prefix                 prefix-encoded doc state   -
//   prefix_with_question   empty (prefix read)        preamble, document
//
// then the decode service reads the question prompt and generates. With
// as_of_tokens the "document" is its first N tokens: the start is the
// nearest stored boundary at or before N and the tokens between it and N
// are fed first.
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/common/log.h"
#include "services/common/proto_convert.h"
#include "services/orchestrator/internal_calls.h"
#include "services/orchestrator/orchestrator_service.h"
#include "services/store/store_metrics.h"

namespace twice::services {
namespace {

void AppendTokens(std::vector<int32_t>& out, absl::Span<const int32_t> part) {
  out.insert(out.end(), part.begin(), part.end());
}

double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

absl::Status OrchestratorService::AnswerQuestion(
    grpc::ServerContext& context, const storage::DocumentRecord& record,
    const ModelCard& model, const Question& question, size_t index,
    const SharedInputs& shared, const AskSink& sink) {
  const auto started = std::chrono::steady_clock::now();
  const PromptTemplates& templates = TemplatesFor(record.model);
  UsageTally usage;
  absl::StatusOr<std::vector<int32_t>> prompt =
      Tokenize(model, FillTemplate(templates.question_prompt, question.text));
  if (!prompt.ok()) return prompt.status();
  const int64_t length = question.document_tokens;
  const bool whole = length == record.token_count;
  absl::Span<const int32_t> document;
  if (shared.tokens != nullptr) {
    document = absl::MakeConstSpan(*shared.tokens).first(length);
  }
  auto preamble = [&]() {
    return Tokenize(model,
                    FillTemplate(templates.read_twice_preamble, question.text));
  };

  // Where the answer starts (a durable state; unset = the empty state), in
  // which mode the fed tokens are read, and what is fed before the prompt.
  std::optional<storage::StateKey> parent;
  std::optional<size_t> parent_boundary;  // when parent is a boundary state
  v1::PrefillMode read_mode = v1::PREFILL_MODE_CAUSAL;
  std::vector<int32_t> feed;
  switch (question.mode) {
    case v1::ASK_MODE_DEFAULT:
    case v1::ASK_MODE_READ_TWICE: {
      if (whole) {
        parent = shared.document_state;
        parent_boundary = record.segments.size() - 1;
        if (index == shared.document_state_owner) {
          usage += shared.document_state_usage;
        } else {
          usage.Reused(record.token_count);
        }
      } else {
        // The nearest boundary at or before the position, then the rest.
        int64_t from = 0;
        for (size_t i = record.segments.size(); i-- > 0;) {
          if (record.segments[i].end_token <= length) {
            absl::StatusOr<storage::StateKey> key =
                EnsureBoundaryState(context, record, i, usage);
            if (!key.ok()) return key.status();
            parent = *key;
            parent_boundary = i;
            from = record.segments[i].end_token;
            break;
          }
        }
        AppendTokens(feed, document.subspan(static_cast<size_t>(from)));
      }
      if (question.mode == v1::ASK_MODE_READ_TWICE) {
        // The first read is the cached document state; only the second
        // read is fed, in the answering call.
        absl::StatusOr<std::vector<int32_t>> pre = preamble();
        if (!pre.ok()) return pre.status();
        AppendTokens(feed, *pre);
        AppendTokens(feed, document);
      }
      break;
    }
    case v1::ASK_MODE_READ_TWICE_FULL: {
      absl::StatusOr<std::vector<int32_t>> pre = preamble();
      if (!pre.ok()) return pre.status();
      absl::StatusOr<std::vector<int32_t>> separator =
          Tokenize(model, templates.document_separator);
      if (!separator.ok()) return separator.status();
      AppendTokens(feed, *pre);
      AppendTokens(feed, document);
      AppendTokens(feed, *separator);
      AppendTokens(feed, document);
      break;
    }
    case v1::ASK_MODE_PREFIX: {
      if (whole) {
        parent = shared.prefix_state;
        if (index == shared.prefix_state_owner) {
          usage += shared.prefix_state_usage;
        } else {
          usage.Reused(record.token_count);
        }
      } else {
        // The prefix encoding of a shorter document is another encoding:
        // computed for this answer.
        read_mode = v1::PREFILL_MODE_PREFIX;
        AppendTokens(feed, document);
      }
      break;
    }
    case v1::ASK_MODE_PREFIX_WITH_QUESTION: {
      // The question is read inside the non-causal prefix, before the
      // document, so the encoder knows what to look for.
      absl::StatusOr<std::vector<int32_t>> pre = preamble();
      if (!pre.ok()) return pre.status();
      read_mode = v1::PREFILL_MODE_PREFIX;
      AppendTokens(feed, *pre);
      AppendTokens(feed, document);
      break;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown ask mode ", static_cast<int>(question.mode)));
  }

  // The fed tokens (second reads, as-of tails, prefix encodings) are read
  // by the decode service in the answering call: nothing is stored.
  v1::GenerateRequest generate;
  generate.set_model(record.model);
  generate.set_tenant(record.tenant);
  generate.set_document_id(record.document_id);
  if (parent) *generate.mutable_state() = ToProto(*parent);
  generate.mutable_read_tokens()->Add(feed.begin(), feed.end());
  generate.set_read_mode(read_mode);
  generate.mutable_prompt_tokens()->Add(prompt->begin(), prompt->end());
  *generate.mutable_sampling() = question.sampling;

  double ttft_ms = -1;
  auto forward = [&](const v1::GenerateResponse& piece) {
    if (ttft_ms < 0) ttft_ms = MillisSince(started);
    v1::AskResponse response;
    response.set_text(piece.text());
    *response.mutable_tokens() = piece.tokens();
    return sink(response);
  };
  absl::StatusOr<GenerateOutcome> outcome = CallGenerate(
      *decode_, context, generate, forward, shared.decode_endpoint);
  if (!outcome.ok() && outcome.status().code() == absl::StatusCode::kNotFound &&
      parent) {
    // The document state vanished or was found corrupt while loading: the
    // decode service deleted it. Recompute once from the tokens and retry.
    Log(LogLevel::kWarning, "ask.state_lost",
        absl::StrCat("doc=", record.document_id, " reason=",
                     LogValue(std::string(outcome.status().message()))));
    usage.ForgetReuse();
    absl::StatusOr<storage::StateKey> key =
        question.mode == v1::ASK_MODE_PREFIX
            ? EnsurePrefixState(context, record, usage)
            : EnsureBoundaryState(context, record, *parent_boundary, usage);
    if (!key.ok()) return key.status();
    outcome = CallGenerate(*decode_, context, generate, forward,
                           shared.decode_endpoint);
  }
  if (!outcome.ok()) return outcome.status();

  const v1::GenerateResponse& final = outcome->final;
  usage.tokens_prefilled += final.tokens_prefilled();
  const v1::Usage wire = usage.ToProto(
      final.tokens_decoded(), ttft_ms < 0 ? MillisSince(started) : ttft_ms,
      MillisSince(started));
  v1::AskResponse done;
  done.set_text(final.text());
  *done.mutable_tokens() = final.tokens();
  done.set_finished(true);
  done.set_finish_reason(final.finish_reason());
  *done.mutable_usage() = wire;
  ServingMetrics& metrics = ServingMetrics::Process();
  metrics.ObserveAskTtft(wire.ttft_ms() / 1000.0);
  metrics.AddStatesReused(wire.states_reused());
  metrics.AddStatesRecomputed(wire.states_recomputed());
  sink(done);
  return absl::OkStatus();
}

}  // namespace twice::services
