// The entry points of asking: Ask and BatchAsk validate their questions,
// resolve once what the questions share (the document's tokens and stored
// states, one decode endpoint), and run the questions — a batch's
// concurrently, their pieces interleaved on the stream. Each question's
// recipe is AnswerQuestion (ask_workflow.cc).
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/orchestrator/orchestrator_service.h"

namespace twice::services {
namespace {

bool ReadsWholeDocumentState(v1::AskMode mode) {
  return mode == v1::ASK_MODE_DEFAULT || mode == v1::ASK_MODE_READ_TWICE;
}

}  // namespace

absl::StatusOr<OrchestratorService::Question>
OrchestratorService::ParseQuestion(
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
    absl::StatusOr<std::vector<int32_t>> encoded = Tokenize(model, text);
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
      limits_.max_question_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "question has ", question.tokens.size(), " tokens; the limit is ",
        limits_.max_question_tokens, " (max_question_tokens)"));
  }
  const bool prefix_mode = question.mode == v1::ASK_MODE_PREFIX ||
                           question.mode == v1::ASK_MODE_PREFIX_WITH_QUESTION;
  if (prefix_mode && !model.has_prefix_encoder()) {
    return model.NoPrefixEncoder();
  }
  return question;
}

absl::Status OrchestratorService::PrepareShared(
    grpc::ServerContext& context, const storage::DocumentRecord& record,
    const std::vector<Question>& questions, SharedInputs& shared) {
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
        store_->GetTokens(storage::RefOf(record));
    if (!tokens.ok()) return tokens.status();
    shared.tokens =
        std::make_shared<const std::vector<int32_t>>(*std::move(tokens));
  }
  if (state_owner) {
    absl::StatusOr<storage::StateKey> key =
        EnsureDocumentState(context, record, shared.document_state_usage);
    if (!key.ok()) return key.status();
    shared.document_state = *key;
    shared.document_state_owner = *state_owner;
  }
  if (prefix_owner) {
    absl::StatusOr<storage::StateKey> key =
        EnsurePrefixState(context, record, shared.prefix_state_usage);
    if (!key.ok()) return key.status();
    shared.prefix_state = *key;
    shared.prefix_state_owner = *prefix_owner;
  }
  // Several questions go to one decode endpoint: it loads the document
  // state once and steps their tokens together.
  if (questions.size() > 1) shared.decode_endpoint = decode_->Pick({});
  return absl::OkStatus();
}

absl::StatusOr<const ModelCard*> OrchestratorService::ModelOfDocument(
    grpc::ServerContext& context, storage::DocumentRecord& record,
    bool locked) {
  absl::StatusOr<const ModelCard*> model = models_->Find(record.model);
  if (absl::IsNotFound(model.status())) {
    return absl::FailedPreconditionError(model.status().message());
  }
  if (!model.ok()) return model.status();
  // States are bound to the model fingerprint: a document read by another
  // version of the model cannot resume from them, but its tokens are the
  // truth.
  if ((*model)->fingerprint() != record.model_fingerprint) {
    absl::Status upgraded = UpgradeDocument(context, **model, record, locked);
    if (!upgraded.ok()) return upgraded;
  }
  return model;
}

grpc::Status OrchestratorService::Ask(
    grpc::ServerContext* context, const v1::AskRequest* request,
    grpc::ServerWriter<v1::AskResponse>* writer) {
  absl::StatusOr<std::shared_ptr<void>> slot = AdmitCall(*context);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  if (grpc::Status bound = CheckBound(); !bound.ok()) return bound;
  absl::StatusOr<storage::DocumentRecord> record =
      FindDocument(*context, request->document_id());
  if (!record.ok()) return ToGrpcStatus(record.status());
  absl::StatusOr<const ModelCard*> model = ModelOfDocument(*context, *record);
  if (!model.ok()) return ToGrpcStatus(model.status());
  absl::StatusOr<Question> question = ParseQuestion(
      **model, *record, request->question(), request->question_tokens(),
      request->mode(), request->sampling(), request->as_of_tokens());
  if (!question.ok()) return ToGrpcStatus(question.status());
  std::vector<Question> questions = {*std::move(question)};
  SharedInputs shared;
  absl::Status prepared = PrepareShared(*context, *record, questions, shared);
  if (!prepared.ok()) return ToGrpcStatus(prepared);
  absl::Status answered =
      AnswerQuestion(*context, *record, **model, questions[0], 0, shared,
                     [writer](const v1::AskResponse& response) {
                       return writer->Write(response);
                     });
  return ToGrpcStatus(answered);
}

grpc::Status OrchestratorService::BatchAsk(
    grpc::ServerContext* context, const v1::BatchAskRequest* request,
    grpc::ServerWriter<v1::BatchAskResponse>* writer) {
  absl::StatusOr<std::shared_ptr<void>> slot = AdmitCall(*context);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  if (grpc::Status bound = CheckBound(); !bound.ok()) return bound;
  if (request->questions_size() == 0) {
    return ToGrpcStatus(
        absl::InvalidArgumentError("BatchAsk needs at least one question"));
  }
  if (request->questions_size() > limits_.max_batch_questions) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "BatchAsk carries ", request->questions_size(),
        " questions; the limit is ", limits_.max_batch_questions)));
  }
  absl::StatusOr<storage::DocumentRecord> record =
      FindDocument(*context, request->document_id());
  if (!record.ok()) return ToGrpcStatus(record.status());
  absl::StatusOr<const ModelCard*> model = ModelOfDocument(*context, *record);
  if (!model.ok()) return ToGrpcStatus(model.status());
  // Validate every question before answering any.
  std::vector<Question> questions;
  for (const v1::BatchQuestion& q : request->questions()) {
    absl::StatusOr<Question> question =
        ParseQuestion(**model, *record, q.question(), q.question_tokens(),
                      q.mode(), q.sampling(), q.as_of_tokens());
    if (!question.ok()) {
      return ToGrpcStatus(
          absl::Status(question.status().code(),
                       absl::StrCat("question ", questions.size(), ": ",
                                    question.status().message())));
    }
    questions.push_back(*std::move(question));
  }
  // One resolution of the document for all questions, then the questions
  // run concurrently; their pieces interleave on the stream.
  SharedInputs shared;
  absl::Status prepared = PrepareShared(*context, *record, questions, shared);
  if (!prepared.ok()) return ToGrpcStatus(prepared);
  std::mutex write_mu;
  std::vector<absl::Status> results(questions.size());
  std::vector<std::thread> workers;
  workers.reserve(questions.size());
  for (size_t i = 0; i < questions.size(); ++i) {
    workers.emplace_back([&, i] {
      results[i] =
          AnswerQuestion(*context, *record, **model, questions[i], i, shared,
                         [&, i](const v1::AskResponse& response) {
                           v1::BatchAskResponse out;
                           out.set_index(static_cast<int32_t>(i));
                           *out.mutable_response() = response;
                           std::lock_guard<std::mutex> lock(write_mu);
                           return writer->Write(out);
                         });
    });
  }
  for (std::thread& worker : workers) worker.join();
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) {
      return ToGrpcStatus(absl::Status(
          results[i].code(),
          absl::StrCat("question ", i, ": ", results[i].message())));
    }
  }
  return grpc::Status::OK;
}

}  // namespace twice::services
