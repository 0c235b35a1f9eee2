#include "services/orchestrator/ask_workflows.h"

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/orchestrator/document_ids.h"
#include "services/orchestrator/question_answerer.h"
#include "services/orchestrator/record_confirmation.h"
#include "services/store/store_metrics.h"

namespace twice::services {
namespace {

// Answers over `document`; the sinks it builds call `release` before their
// first write, and write nothing when it says false.
using Answering = std::function<absl::Status(
    AskedDocument& document, const std::function<bool()>& release)>;

absl::Status AnswerOpened(QuestionAnswerer& answerer,
                          grpc::ServerContext& server,
                          storage::DocumentRecord record,
                          const Answering& answer,
                          const std::function<bool()>& release) {
  absl::StatusOr<AskedDocument> document =
      answerer.OpenRecord(server, std::move(record));
  if (!document.ok()) return document.status();
  return answer(*document, release);
}

// Runs `answer` over the current record of `ref`. With a record cache (a
// store across the network), a cached record that the store's watch shows
// unchanged since it was read is the current record; any other cached
// record starts the answer at once while the current one is read, and
// what the answer did counts only when the read confirms the guess
// (otherwise it runs again from the record read). Either way the caller
// receives an answer from the current record.
absl::Status AnswerCurrentRecord(const WorkflowContext& context,
                                 grpc::ServerContext& server,
                                 const storage::DocumentRef& ref,
                                 const Answering& answer) {
  QuestionAnswerer answerer(context);
  const std::function<bool()> always = [] { return true; };
  RecordCache* cache = context.records;
  storage::RecordWatch* watch = context.store->record_watch();
  std::optional<KeptRecord> kept;
  if (cache != nullptr) kept = cache->Find(ref);
  if (!kept) {
    std::optional<storage::RecordWatch::Mark> mark;
    if (cache != nullptr) mark = BeginWatch(watch, ref);
    absl::StatusOr<storage::DocumentRecord> record =
        FindDocumentOf(*context.store, ref);
    if (!record.ok()) return record.status();
    if (cache != nullptr) cache->Put(*record, std::move(mark));
    return AnswerOpened(answerer, server, *std::move(record), answer, always);
  }
  if (watch != nullptr && kept->mark.has_value() &&
      watch->Unchanged(*kept->mark)) {
    ServingMetrics::Process().AddWatchedRecordAsk();
    return AnswerOpened(answerer, server, std::move(kept->record), answer,
                        always);
  }
  RecordConfirmation confirmation(*context.store, kept->record, watch);
  absl::Status guessed =
      AnswerOpened(answerer, server, std::move(kept->record), answer,
                   [&confirmation] { return confirmation.Confirmed(); });
  const bool confirmed = confirmation.Confirmed();
  ServingMetrics::Process().AddCachedRecordAsk(confirmed);
  absl::StatusOr<storage::DocumentRecord> current = confirmation.Current();
  if (!current.ok()) {
    cache->Forget(ref);
    return current.status();
  }
  // Kept with the mark its read began under, so the next ask can trust it.
  cache->Put(*current, confirmation.WatchMark());
  if (confirmed) return guessed;
  return AnswerOpened(answerer, server, *std::move(current), answer, always);
}

// A sink that writes only once `release` said yes (asked once per sink).
template <typename Write>
AskSink Released(const std::function<bool()>& release, Write write) {
  return [&release, write, checked = false,
          released = false](const v1::AskResponse& response) mutable {
    if (!checked) {
      released = release();
      checked = true;
    }
    return released && write(response);
  };
}

}  // namespace

grpc::Status AskWorkflow::Run(grpc::ServerContext& server,
                              const v1::AskRequest& request,
                              grpc::ServerWriter<v1::AskResponse>& writer) {
  QuestionAnswerer answerer(context_);
  const Answering answer = [&](AskedDocument& document,
                               const std::function<bool()>& release) {
    const storage::DocumentRecord& record = document.record;
    const ModelCard& model = *document.model;
    absl::StatusOr<Question> question = answerer.Parse(
        model, record, request.question(), request.question_tokens(),
        request.mode(), request.sampling(), request.as_of_tokens());
    if (!question.ok()) return question.status();
    std::vector<Question> questions = {*std::move(question)};
    SharedInputs shared;
    absl::Status prepared = answerer.Prepare(server, record, questions, shared);
    if (!prepared.ok()) return prepared;
    return answerer.Answer(
        server, record, model, questions[0], 0, shared,
        Released(release, [&writer](const v1::AskResponse& response) {
          return writer.Write(response);
        }));
  };
  return ToGrpcStatus(AnswerCurrentRecord(
      context_, server, {tenant_, request.document_id()}, answer));
}

grpc::Status BatchAskWorkflow::Run(
    grpc::ServerContext& server, const v1::BatchAskRequest& request,
    grpc::ServerWriter<v1::BatchAskResponse>& writer) {
  if (request.questions_size() == 0) {
    return ToGrpcStatus(
        absl::InvalidArgumentError("BatchAsk needs at least one question"));
  }
  if (request.questions_size() > context_.limits->max_batch_questions) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "BatchAsk carries ", request.questions_size(),
        " questions; the limit is ", context_.limits->max_batch_questions)));
  }
  QuestionAnswerer answerer(context_);
  const Answering answer =
      [&](AskedDocument& document,
          const std::function<bool()>& release) -> absl::Status {
    const storage::DocumentRecord& record = document.record;
    const ModelCard& model = *document.model;
    // Validate every question before answering any.
    std::vector<Question> questions;
    for (const v1::BatchQuestion& q : request.questions()) {
      absl::StatusOr<Question> question =
          answerer.Parse(model, record, q.question(), q.question_tokens(),
                         q.mode(), q.sampling(), q.as_of_tokens());
      if (!question.ok()) {
        return absl::Status(question.status().code(),
                            absl::StrCat("question ", questions.size(), ": ",
                                         question.status().message()));
      }
      questions.push_back(*std::move(question));
    }
    // One resolution of the document for all questions, then the questions
    // run concurrently; their pieces interleave on the stream.
    SharedInputs shared;
    absl::Status prepared = answerer.Prepare(server, record, questions, shared);
    if (!prepared.ok()) return prepared;
    std::mutex write_mu;
    std::vector<absl::Status> results(questions.size());
    std::vector<std::thread> workers;
    workers.reserve(questions.size());
    for (size_t i = 0; i < questions.size(); ++i) {
      workers.emplace_back([&, i] {
        results[i] = answerer.Answer(
            server, record, model, questions[i], i, shared,
            Released(release, [&, i](const v1::AskResponse& response) {
              v1::BatchAskResponse out;
              out.set_index(static_cast<int32_t>(i));
              *out.mutable_response() = response;
              std::lock_guard<std::mutex> lock(write_mu);
              return writer.Write(out);
            }));
      });
    }
    for (std::thread& worker : workers) worker.join();
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i].ok()) {
        return absl::Status(
            results[i].code(),
            absl::StrCat("question ", i, ": ", results[i].message()));
      }
    }
    return absl::OkStatus();
  };
  return ToGrpcStatus(AnswerCurrentRecord(
      context_, server, {tenant_, request.document_id()}, answer));
}

}  // namespace twice::services
