#include "services/orchestrator/ask_workflows.h"

#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/orchestrator/question_answerer.h"

namespace twice::services {

grpc::Status AskWorkflow::Run(grpc::ServerContext& server,
                              const v1::AskRequest& request,
                              grpc::ServerWriter<v1::AskResponse>& writer) {
  QuestionAnswerer answerer(context_);
  absl::StatusOr<AskedDocument> document =
      answerer.Open(server, {tenant_, request.document_id()});
  if (!document.ok()) return ToGrpcStatus(document.status());
  const storage::DocumentRecord& record = document->record;
  const ModelCard& model = *document->model;
  absl::StatusOr<Question> question = answerer.Parse(
      model, record, request.question(), request.question_tokens(),
      request.mode(), request.sampling(), request.as_of_tokens());
  if (!question.ok()) return ToGrpcStatus(question.status());
  std::vector<Question> questions = {*std::move(question)};
  SharedInputs shared;
  absl::Status prepared = answerer.Prepare(server, record, questions, shared);
  if (!prepared.ok()) return ToGrpcStatus(prepared);
  absl::Status answered =
      answerer.Answer(server, record, model, questions[0], 0, shared,
                      [&writer](const v1::AskResponse& response) {
                        return writer.Write(response);
                      });
  return ToGrpcStatus(answered);
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
  absl::StatusOr<AskedDocument> document =
      answerer.Open(server, {tenant_, request.document_id()});
  if (!document.ok()) return ToGrpcStatus(document.status());
  const storage::DocumentRecord& record = document->record;
  const ModelCard& model = *document->model;
  // Validate every question before answering any.
  std::vector<Question> questions;
  for (const v1::BatchQuestion& q : request.questions()) {
    absl::StatusOr<Question> question =
        answerer.Parse(model, record, q.question(), q.question_tokens(),
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
  absl::Status prepared = answerer.Prepare(server, record, questions, shared);
  if (!prepared.ok()) return ToGrpcStatus(prepared);
  std::mutex write_mu;
  std::vector<absl::Status> results(questions.size());
  std::vector<std::thread> workers;
  workers.reserve(questions.size());
  for (size_t i = 0; i < questions.size(); ++i) {
    workers.emplace_back([&, i] {
      results[i] =
          answerer.Answer(server, record, model, questions[i], i, shared,
                          [&, i](const v1::AskResponse& response) {
                            v1::BatchAskResponse out;
                            out.set_index(static_cast<int32_t>(i));
                            *out.mutable_response() = response;
                            std::lock_guard<std::mutex> lock(write_mu);
                            return writer.Write(out);
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
