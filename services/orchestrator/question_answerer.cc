#include "services/orchestrator/question_answerer.h"

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/common/log.h"
#include "services/common/proto_convert.h"
#include "services/orchestrator/document_ids.h"
#include "services/orchestrator/document_states.h"
#include "services/orchestrator/internal_calls.h"
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

bool ReadsWholeDocumentState(v1::AskMode mode) {
  return mode == v1::ASK_MODE_DEFAULT || mode == v1::ASK_MODE_READ_TWICE;
}

}  // namespace

absl::StatusOr<AskedDocument> QuestionAnswerer::Open(
    grpc::ServerContext& server, const storage::DocumentRef& document) {
  absl::StatusOr<storage::DocumentRecord> record =
      FindDocumentOf(*context_.store, document);
  if (!record.ok()) return record.status();
  return OpenRecord(server, *std::move(record));
}

absl::StatusOr<AskedDocument> QuestionAnswerer::OpenRecord(
    grpc::ServerContext& server, storage::DocumentRecord record) {
  AskedDocument asked;
  asked.record = std::move(record);
  absl::StatusOr<const ModelCard*> model =
      DocumentStates(context_).ModelOfDocument(server, asked.record);
  if (!model.ok()) return model.status();
  asked.model = *model;
  return asked;
}

absl::StatusOr<Question> QuestionAnswerer::Parse(
    const ModelCard& model, const storage::DocumentRecord& record,
    const std::string& text, absl::Span<const int32_t> ids, v1::AskMode mode,
    const v1::SamplingOptions& sampling, int64_t as_of_tokens) {
  Question question;
  question.mode =
      mode == v1::ASK_MODE_UNSPECIFIED ? v1::ASK_MODE_DEFAULT : mode;
  if (!v1::AskMode_IsValid(question.mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown ask mode ", static_cast<int>(mode)));
  }
  if (as_of_tokens < 0 || as_of_tokens > record.token_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("as_of_tokens must be in [0, ", record.token_count,
                     "] (the document's length), got ", as_of_tokens));
  }
  question.document_tokens =
      as_of_tokens == 0 ? record.token_count : as_of_tokens;
  question.sampling = sampling;
  if (!text.empty()) {
    absl::StatusOr<std::vector<int32_t>> encoded =
        model.tokenizer().Encode(text);
    if (!encoded.ok()) return encoded.status();
    question.tokens = *std::move(encoded);
    question.text = text;
  } else {
    question.tokens.assign(ids.begin(), ids.end());
    if (absl::Status valid = model.CheckTokenIds(question.tokens, "question");
        !valid.ok()) {
      return valid;
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
      context_.limits->max_question_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "question has ", question.tokens.size(), " tokens; the limit is ",
        context_.limits->max_question_tokens, " (max_question_tokens)"));
  }
  const bool prefix_mode = question.mode == v1::ASK_MODE_PREFIX ||
                           question.mode == v1::ASK_MODE_PREFIX_WITH_QUESTION;
  if (prefix_mode && !model.has_prefix_encoder()) {
    return model.NoPrefixEncoder();
  }
  return question;
}

absl::Status QuestionAnswerer::Prepare(grpc::ServerContext& server,
                                       const storage::DocumentRecord& record,
                                       const std::vector<Question>& questions,
                                       SharedInputs& shared) {
  std::optional<size_t> state_owner, prefix_owner;
  bool need_tokens = false;
  for (size_t i = 0; i < questions.size(); ++i) {
    const Question& q = questions[i];
    const bool whole = q.document_tokens == record.token_count;
    if (whole && ReadsWholeDocumentState(q.mode) && !state_owner) {
      state_owner = i;
    }
    if (whole && q.mode == v1::ASK_MODE_PREFIX && !prefix_owner) {
      prefix_owner = i;
    }
    if (!whole ||
        (q.mode != v1::ASK_MODE_DEFAULT && q.mode != v1::ASK_MODE_PREFIX)) {
      need_tokens = true;
    }
  }
  if (need_tokens) {
    absl::StatusOr<std::vector<int32_t>> tokens =
        context_.store->GetTokens(storage::RefOf(record));
    if (!tokens.ok()) return tokens.status();
    shared.tokens =
        std::make_shared<const std::vector<int32_t>>(*std::move(tokens));
  }
  if (state_owner) {
    if (record.segments.empty()) {
      return absl::DataLossError(
          absl::StrCat("document '", record.document_id,
                       "' has no segment states recorded"));
    }
    // The record names it, so it is taken as stored without asking the
    // store first: that check would cost every question a store round trip
    // (a network one on a store role or RADOS), and the decode call that
    // loads the state recomputes it when it turns out missing
    // (ask.state_lost below).
    shared.document_state = record.segments.back().state_key;
    shared.document_state_usage.Reused(record.token_count);
    shared.document_state_owner = *state_owner;
  }
  if (prefix_owner) {
    absl::StatusOr<storage::StateKey> key =
        DocumentStates(context_).EnsurePrefixState(server, record,
                                                   shared.prefix_state_usage);
    if (!key.ok()) return key.status();
    shared.prefix_state = *key;
    shared.prefix_state_owner = *prefix_owner;
  }
  // Several questions go to one decode endpoint: it loads the document
  // state once and steps their tokens together.
  if (questions.size() > 1) shared.decode_endpoint = context_.decode->Pick({});
  return absl::OkStatus();
}

absl::Status QuestionAnswerer::Answer(grpc::ServerContext& server,
                                      const storage::DocumentRecord& record,
                                      const ModelCard& model,
                                      const Question& question, size_t index,
                                      const SharedInputs& shared,
                                      const AskSink& sink) {
  const auto started = std::chrono::steady_clock::now();
  const PromptTemplates& templates = context_.templates->For(record.model);
  UsageTally usage;
  DocumentStates states(context_);
  absl::StatusOr<std::vector<int32_t>> prompt = model.tokenizer().Encode(
      FillTemplate(templates.question_prompt, question.text));
  if (!prompt.ok()) return prompt.status();
  const int64_t length = question.document_tokens;
  const bool whole = length == record.token_count;
  absl::Span<const int32_t> document;
  if (shared.tokens != nullptr) {
    document = absl::MakeConstSpan(*shared.tokens).first(length);
  }
  auto preamble = [&]() {
    return model.tokenizer().Encode(
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
                states.EnsureBoundaryState(server, record, i, usage);
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
          model.tokenizer().Encode(templates.document_separator);
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
      *context_.decode, server, generate, forward, shared.decode_endpoint);
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
            ? states.EnsurePrefixState(server, record, usage)
            : states.EnsureBoundaryState(server, record, *parent_boundary,
                                         usage);
    if (!key.ok()) return key.status();
    outcome = CallGenerate(*context_.decode, server, generate, forward,
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
