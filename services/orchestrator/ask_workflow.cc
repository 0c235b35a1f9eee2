// The ask half of the orchestrator: resolving the document state (with
// recompute when a stored state is lost) and running each mode's recipe.
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/common/log.h"
#include "services/common/proto_convert.h"
#include "services/common/state_io.h"
#include "services/orchestrator/internal_calls.h"
#include "services/orchestrator/orchestrator_service.h"

namespace twice::services {
namespace {

std::vector<int32_t> Concat(std::initializer_list<absl::Span<const int32_t>> parts) {
  std::vector<int32_t> out;
  for (absl::Span<const int32_t> part : parts) {
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

absl::StatusOr<OrchestratorService::Question> OrchestratorService::ParseQuestion(
    const engine::Model& model, const std::string& text,
    absl::Span<const int32_t> ids, v1::AskMode mode,
    const v1::SamplingOptions& sampling) {
  Question question;
  question.mode = mode == v1::ASK_MODE_UNSPECIFIED ? v1::ASK_MODE_DEFAULT : mode;
  if (!v1::AskMode_IsValid(question.mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown ask mode ", static_cast<int>(mode)));
  }
  question.sampling = sampling;
  if (!text.empty()) {
    absl::StatusOr<std::vector<int32_t>> encoded = Tokenize(model, text);
    if (!encoded.ok()) return encoded.status();
    question.tokens = *std::move(encoded);
    question.text = text;
  } else {
    question.tokens.assign(ids.begin(), ids.end());
    const int32_t vocab = model.description().vocab_size;
    for (int32_t id : question.tokens) {
      if (id < 0 || id >= vocab) {
        return absl::InvalidArgumentError(
            absl::StrCat("question token id ", id,
                         " is outside the vocabulary [0, ", vocab, ")"));
      }
    }
    absl::StatusOr<std::string> decoded =
        model.tokenizer().Decode(question.tokens);
    if (!decoded.ok()) return decoded.status();
    question.text = *std::move(decoded);
  }
  if (question.tokens.empty()) {
    return absl::InvalidArgumentError("the question is empty");
  }
  if (static_cast<int64_t>(question.tokens.size()) >
      limits_.max_question_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("question has ", question.tokens.size(),
                     " tokens; the limit is ", limits_.max_question_tokens,
                     " (max_question_tokens)"));
  }
  return question;
}

absl::StatusOr<storage::StateKey> OrchestratorService::EnsureDocumentState(
    grpc::ServerContext& context, const storage::DocumentRecord& record,
    v1::Usage& usage) {
  if (record.segments.empty()) {
    return absl::DataLossError(absl::StrCat(
        "document '", record.document_id, "' has no segment states recorded"));
  }
  const storage::StateKey& last = record.segments.back().state_key;
  absl::StatusOr<bool> stored = store_->HasState(last, /*ephemeral=*/false);
  if (!stored.ok()) return stored.status();
  if (*stored) {
    usage.set_states_reused(usage.states_reused() + 1);
    usage.set_tokens_reused(usage.tokens_reused() + record.token_count);
    return last;
  }
  // Walk back to the latest boundary whose state is still stored and read
  // the document's tokens from there (tokens are the truth).
  int resume = static_cast<int>(record.segments.size()) - 1;
  while (resume >= 0) {
    absl::StatusOr<bool> has =
        store_->HasState(record.segments[resume].state_key, false);
    if (!has.ok()) return has.status();
    if (*has) break;
    --resume;
  }
  absl::StatusOr<std::vector<int32_t>> tokens =
      store_->GetTokens(record.tenant, record.document_id);
  if (!tokens.ok()) return tokens.status();
  PrefillCall call;
  call.model = record.model;
  call.tenant = record.tenant;
  call.checkpoint_tokens = record.segment_tokens;
  int64_t start = 0;
  if (resume >= 0) {
    call.parent = record.segments[resume].state_key;
    start = record.segments[resume].end_token;
    usage.set_states_reused(usage.states_reused() + 1);
    usage.set_tokens_reused(usage.tokens_reused() + start);
  }
  absl::StatusOr<PrefillOutcome> outcome = CallPrefill(
      *prefill_, context, call,
      absl::MakeConstSpan(*tokens).subspan(static_cast<size_t>(start)),
      nullptr);
  if (!outcome.ok()) return outcome.status();
  // Chain keys are content addresses: recomputing the same tokens from the
  // same boundary must land on the recorded key.
  if (!(outcome->final_state == last)) {
    return absl::InternalError(absl::StrCat(
        "recomputed state of document '", record.document_id,
        "' does not match its recorded key"));
  }
  const int64_t recomputed = static_cast<int64_t>(outcome->checkpoints.size()) -
                             outcome->checkpoints_reused +
                             outcome->states_recomputed;
  usage.set_states_recomputed(usage.states_recomputed() + recomputed);
  usage.set_tokens_prefilled(usage.tokens_prefilled() + outcome->tokens_computed);
  for (int64_t i = 0; i < recomputed; ++i) store_->RecordRecompute();
  Log(LogLevel::kInfo, "document.recomputed",
      absl::StrCat("doc=", record.document_id, " from_token=", start,
                   " states=", recomputed));
  return last;
}

absl::Status OrchestratorService::NoPrefixEncoder(const std::string& model_name,
                                                  const engine::Model& model) {
  return absl::UnimplementedError(absl::StrCat(
      "model '", model_name, "' (", model.description().architecture,
      ") has no prefix encoder; prefix modes need a JRT-RNN model"));
}

absl::StatusOr<PrefillOutcome> OrchestratorService::PrefillPrefixState(
    grpc::ServerContext& context, const std::string& model,
    const std::string& tenant, absl::Span<const int32_t> tokens) {
  PrefillCall call;
  call.model = model;
  call.tenant = tenant;
  call.mode = v1::PREFILL_MODE_PREFIX;
  call.checkpoint_tokens = 0;  // one state: see the declaration
  return CallPrefill(*prefill_, context, call, tokens, nullptr);
}

absl::StatusOr<storage::StateKey> OrchestratorService::EnsurePrefixState(
    grpc::ServerContext& context, const storage::DocumentRecord& record,
    v1::Usage& usage) {
  const std::string name(PrefillModeName(engine::PrefillMode::kPrefix));
  std::optional<storage::StateKey> recorded;
  for (const auto& [mode, key] : record.mode_states) {
    if (mode == name) recorded = key;
  }
  if (recorded) {
    absl::StatusOr<bool> stored = store_->HasState(*recorded, false);
    if (!stored.ok()) return stored.status();
    if (*stored) {
      usage.set_states_reused(usage.states_reused() + 1);
      usage.set_tokens_reused(usage.tokens_reused() + record.token_count);
      return *recorded;
    }
  }
  // Lost, or never prepared (a document ingested without it): tokens are the
  // truth, so encode them again.
  absl::StatusOr<std::vector<int32_t>> tokens =
      store_->GetTokens(record.tenant, record.document_id);
  if (!tokens.ok()) return tokens.status();
  absl::StatusOr<PrefillOutcome> outcome =
      PrefillPrefixState(context, record.model, record.tenant, *tokens);
  if (!outcome.ok()) return outcome.status();
  usage.set_tokens_prefilled(usage.tokens_prefilled() +
                             outcome->tokens_computed);
  if (recorded) {
    // Chain keys are content addresses: the same tokens from the same root
    // must land on the recorded key.
    if (!(outcome->final_state == *recorded)) {
      return absl::InternalError(absl::StrCat(
          "recomputed prefix state of document '", record.document_id,
          "' does not match its recorded key"));
    }
    usage.set_states_recomputed(usage.states_recomputed() + 1);
    store_->RecordRecompute();
    Log(LogLevel::kInfo, "document.prefix_recomputed",
        absl::StrCat("doc=", record.document_id));
    return *recorded;
  }
  // Record it so the next question reuses it. The state is durable already;
  // failing to record it only costs a recompute later.
  storage::DocumentRecord updated = record;
  updated.mode_states.emplace_back(name, outcome->final_state);
  absl::Status saved = store_->UpdateDocument(updated);
  if (!saved.ok()) {
    Log(LogLevel::kWarning, "document.prefix_record_failed",
        absl::StrCat("doc=", record.document_id,
                     " reason=", LogValue(std::string(saved.message()))));
  }
  return outcome->final_state;
}

absl::Status OrchestratorService::AnswerQuestion(
    grpc::ServerContext& context, const storage::DocumentRecord& record,
    const engine::Model& model, const Question& question,
    const AskSink& sink) {
  const auto started = std::chrono::steady_clock::now();
  v1::Usage usage;
  absl::StatusOr<std::vector<int32_t>> prompt = Tokenize(
      model, FillTemplate(templates_.question_prompt, question.text));
  if (!prompt.ok()) return prompt.status();

  // Where decoding starts: a document state, or an ephemeral state that the
  // prefill service made for this question.
  std::optional<storage::StateKey> start;
  bool ephemeral = false;
  switch (question.mode) {
    case v1::ASK_MODE_DEFAULT: {
      absl::StatusOr<storage::StateKey> key =
          EnsureDocumentState(context, record, usage);
      if (!key.ok()) return key.status();
      start = *key;
      break;
    }
    case v1::ASK_MODE_READ_TWICE:
    case v1::ASK_MODE_READ_TWICE_FULL: {
      absl::StatusOr<std::vector<int32_t>> preamble = Tokenize(
          model, FillTemplate(templates_.read_twice_preamble, question.text));
      if (!preamble.ok()) return preamble.status();
      absl::StatusOr<std::vector<int32_t>> document =
          store_->GetTokens(record.tenant, record.document_id);
      if (!document.ok()) return document.status();
      PrefillCall call;
      call.model = record.model;
      call.tenant = record.tenant;
      call.ephemeral = true;
      std::vector<int32_t> feed;
      if (question.mode == v1::ASK_MODE_READ_TWICE) {
        // The first read is the cached document state; only the second read
        // is prefilled, on the prefill service.
        absl::StatusOr<storage::StateKey> key =
            EnsureDocumentState(context, record, usage);
        if (!key.ok()) return key.status();
        call.parent = *key;
        feed = Concat({*preamble, *document});
      } else {
        absl::StatusOr<std::vector<int32_t>> separator =
            Tokenize(model, templates_.document_separator);
        if (!separator.ok()) return separator.status();
        feed = Concat({*preamble, *document, *separator, *document});
      }
      absl::StatusOr<PrefillOutcome> outcome =
          CallPrefill(*prefill_, context, call, feed, nullptr);
      if (!outcome.ok()) return outcome.status();
      usage.set_tokens_prefilled(usage.tokens_prefilled() +
                                 outcome->tokens_computed);
      start = outcome->final_state;
      ephemeral = true;
      break;
    }
    case v1::ASK_MODE_PREFIX: {
      if (model.description().prefix_length <= 0) {
        return NoPrefixEncoder(record.model, model);
      }
      absl::StatusOr<storage::StateKey> key =
          EnsurePrefixState(context, record, usage);
      if (!key.ok()) return key.status();
      start = *key;
      break;
    }
    case v1::ASK_MODE_PREFIX_WITH_QUESTION: {
      if (model.description().prefix_length <= 0) {
        return NoPrefixEncoder(record.model, model);
      }
      // The question is read inside the non-causal prefix, before the
      // document, so the encoder knows what to look for; nothing of it is
      // cacheable.
      absl::StatusOr<std::vector<int32_t>> preamble = Tokenize(
          model, FillTemplate(templates_.read_twice_preamble, question.text));
      if (!preamble.ok()) return preamble.status();
      absl::StatusOr<std::vector<int32_t>> document =
          store_->GetTokens(record.tenant, record.document_id);
      if (!document.ok()) return document.status();
      PrefillCall call;
      call.model = record.model;
      call.tenant = record.tenant;
      call.mode = v1::PREFILL_MODE_PREFIX;
      call.ephemeral = true;
      absl::StatusOr<PrefillOutcome> outcome = CallPrefill(
          *prefill_, context, call, Concat({*preamble, *document}), nullptr);
      if (!outcome.ok()) return outcome.status();
      usage.set_tokens_prefilled(usage.tokens_prefilled() +
                                 outcome->tokens_computed);
      start = outcome->final_state;
      ephemeral = true;
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown ask mode ", static_cast<int>(question.mode)));
  }

  v1::GenerateRequest generate;
  generate.set_model(record.model);
  generate.set_tenant(record.tenant);
  *generate.mutable_state() = ToProto(*start);
  generate.set_ephemeral(ephemeral);
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
  absl::StatusOr<GenerateOutcome> outcome =
      CallGenerate(*decode_, context, generate, forward);
  if (!outcome.ok() && outcome.status().code() == absl::StatusCode::kNotFound &&
      (question.mode == v1::ASK_MODE_DEFAULT ||
       question.mode == v1::ASK_MODE_PREFIX)) {
    // The document state vanished or was found corrupt while loading: the
    // decode service deleted it. Recompute once from the tokens and retry.
    Log(LogLevel::kWarning, "ask.state_lost",
        absl::StrCat("doc=", record.document_id, " reason=",
                     LogValue(std::string(outcome.status().message()))));
    usage.set_states_reused(0);
    usage.set_tokens_reused(0);
    absl::StatusOr<storage::StateKey> key =
        question.mode == v1::ASK_MODE_PREFIX
            ? EnsurePrefixState(context, record, usage)
            : EnsureDocumentState(context, record, usage);
    if (!key.ok()) return key.status();
    outcome = CallGenerate(*decode_, context, generate, forward);
  }
  if (ephemeral) {
    // Consumed: drop it now rather than waiting for its TTL.
    absl::Status dropped = store_->DeleteState(*start, /*ephemeral=*/true);
    if (!dropped.ok()) {
      Log(LogLevel::kWarning, "ephemeral.delete_failed",
          absl::StrCat("reason=", LogValue(std::string(dropped.message()))));
    }
  }
  if (!outcome.ok()) return outcome.status();

  const v1::GenerateResponse& final = outcome->final;
  usage.set_tokens_prefilled(usage.tokens_prefilled() + final.tokens_prefilled());
  usage.set_tokens_decoded(final.tokens_decoded());
  usage.set_ttft_ms(ttft_ms < 0 ? MillisSince(started) : ttft_ms);
  usage.set_total_ms(MillisSince(started));
  v1::AskResponse done;
  done.set_text(final.text());
  *done.mutable_tokens() = final.tokens();
  done.set_finished(true);
  done.set_finish_reason(final.finish_reason());
  *done.mutable_usage() = usage;
  sink(done);
  return absl::OkStatus();
}

absl::StatusOr<const engine::Model*> OrchestratorService::ModelOfDocument(
    const storage::DocumentRecord& record) const {
  absl::StatusOr<const engine::Model*> model = models_->Find(record.model);
  if (!model.ok()) {
    return absl::FailedPreconditionError(model.status().message());
  }
  // States are bound to the model fingerprint: a document read by another
  // version of the model cannot resume here.
  if ((*model)->description().fingerprint != record.model_fingerprint) {
    return absl::FailedPreconditionError(
        absl::StrCat("document '", record.document_id,
                     "' was read by another version of model '", record.model,
                     "'; ingest it again"));
  }
  return model;
}

grpc::Status OrchestratorService::Ask(grpc::ServerContext* context,
                                      const v1::AskRequest* request,
                                      grpc::ServerWriter<v1::AskResponse>* writer) {
  if (grpc::Status bound = CheckBound(); !bound.ok()) return bound;
  absl::StatusOr<storage::DocumentRecord> record =
      FindDocument(*context, request->document_id());
  if (!record.ok()) return ToGrpcStatus(record.status());
  absl::StatusOr<const engine::Model*> model = ModelOfDocument(*record);
  if (!model.ok()) return ToGrpcStatus(model.status());
  absl::StatusOr<Question> question =
      ParseQuestion(**model, request->question(), request->question_tokens(),
                    request->mode(), request->sampling());
  if (!question.ok()) return ToGrpcStatus(question.status());
  absl::Status answered = AnswerQuestion(
      *context, *record, **model, *question,
      [writer](const v1::AskResponse& response) {
        return writer->Write(response);
      });
  return ToGrpcStatus(answered);
}

grpc::Status OrchestratorService::BatchAsk(
    grpc::ServerContext* context, const v1::BatchAskRequest* request,
    grpc::ServerWriter<v1::BatchAskResponse>* writer) {
  if (grpc::Status bound = CheckBound(); !bound.ok()) return bound;
  if (request->questions_size() == 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "BatchAsk needs at least one question");
  }
  if (request->questions_size() > limits_.max_batch_questions) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("BatchAsk carries ", request->questions_size(),
                     " questions; the limit is ", limits_.max_batch_questions));
  }
  absl::StatusOr<storage::DocumentRecord> record =
      FindDocument(*context, request->document_id());
  if (!record.ok()) return ToGrpcStatus(record.status());
  absl::StatusOr<const engine::Model*> model = ModelOfDocument(*record);
  if (!model.ok()) return ToGrpcStatus(model.status());
  // Validate every question before answering any.
  std::vector<Question> questions;
  for (const v1::BatchQuestion& q : request->questions()) {
    absl::StatusOr<Question> question = ParseQuestion(
        **model, q.question(), q.question_tokens(), q.mode(), q.sampling());
    if (!question.ok()) {
      return ToGrpcStatus(absl::Status(
          question.status().code(),
          absl::StrCat("question ", questions.size(), ": ",
                       question.status().message())));
    }
    questions.push_back(*std::move(question));
  }
  // Questions run one after another for now; sharing one state load across
  // concurrent questions comes with the orchestrator workflows issue.
  for (size_t i = 0; i < questions.size(); ++i) {
    absl::Status answered = AnswerQuestion(
        *context, *record, **model, questions[i],
        [writer, i](const v1::AskResponse& response) {
          v1::BatchAskResponse out;
          out.set_index(static_cast<int32_t>(i));
          *out.mutable_response() = response;
          return writer->Write(out);
        });
    if (!answered.ok()) {
      return ToGrpcStatus(absl::Status(
          answered.code(),
          absl::StrCat("question ", i, ": ", answered.message())));
    }
  }
  return grpc::Status::OK;
}

}  // namespace twice::services
