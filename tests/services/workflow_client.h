// Test helper for the orchestrator workflow tests: one real twice-server
// process (role all, or an orchestrator in front of other roles) and typed
// calls of its public, decode and store APIs.
#ifndef TWICE_TESTS_SERVICES_WORKFLOW_CLIENT_H_
#define TWICE_TESTS_SERVICES_WORKFLOW_CLIENT_H_

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "twice/v1/decode.grpc.pb.h"
#include "twice/v1/orchestrator.grpc.pb.h"

namespace twice::testing {

struct WorkflowAnswer {
  grpc::Status status;
  std::vector<int32_t> tokens;
  std::string text;
  v1::Usage usage;
  std::string finish_reason;
};

struct IngestResult {
  grpc::Status status;
  v1::IngestResponse done;
  std::vector<v1::IngestResponse> progress;
};

class WorkflowClient {
 public:
  // `internal_address`: where the server's internal services listen (role
  // all's --internal-listen); empty = `address` (a decode role's own).
  explicit WorkflowClient(const std::string& address,
                          const std::string& internal_address = "")
      : channel_(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
        internal_channel_(
            internal_address.empty()
                ? channel_
                : grpc::CreateChannel(internal_address,
                                      grpc::InsecureChannelCredentials())),
        orchestrator_(v1::Orchestrator::NewStub(channel_)),
        decode_(v1::Decode::NewStub(internal_channel_)) {}

  // Ingests token ids (or `text` when `tokens` is empty).
  IngestResult Ingest(const std::vector<int32_t>& tokens, int64_t segment,
                      const std::string& id = "", const std::string& model = "",
                      const std::string& text = "") {
    grpc::ClientContext context;
    context.set_deadline(Deadline(120));
    auto stream = orchestrator_->Ingest(&context);
    v1::IngestRequest request;
    request.mutable_header()->set_segment_tokens(segment);
    request.mutable_header()->set_document_id(id);
    request.mutable_header()->set_model(model);
    request.mutable_tokens()->Add(tokens.begin(), tokens.end());
    request.set_text(text);
    stream->Write(request);
    stream->WritesDone();
    return Finish(stream.get());
  }

  IngestResult Append(const std::string& id, const std::vector<int32_t>& tokens,
                      int64_t segment, const std::string& text = "") {
    grpc::ClientContext context;
    context.set_deadline(Deadline(120));
    auto stream = orchestrator_->Append(&context);
    v1::AppendRequest request;
    request.set_document_id(id);
    request.set_segment_tokens(segment);
    request.mutable_tokens()->Add(tokens.begin(), tokens.end());
    request.set_text(text);
    stream->Write(request);
    stream->WritesDone();
    return Finish(stream.get());
  }

  static v1::AskRequest Question(const std::string& doc,
                                 const std::string& question,
                                 v1::AskMode mode = v1::ASK_MODE_DEFAULT,
                                 int max_tokens = 8, int64_t as_of = 0) {
    v1::AskRequest request;
    request.set_document_id(doc);
    request.set_question(question);
    request.set_mode(mode);
    request.set_as_of_tokens(as_of);
    request.mutable_sampling()->set_max_tokens(max_tokens);
    request.mutable_sampling()->set_ignore_eos(true);
    return request;
  }

  WorkflowAnswer Ask(const v1::AskRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(Deadline(120));
    auto reader = orchestrator_->Ask(&context, request);
    WorkflowAnswer answer;
    v1::AskResponse response;
    while (reader->Read(&response)) {
      answer.tokens.insert(answer.tokens.end(), response.tokens().begin(),
                           response.tokens().end());
      answer.text += response.text();
      if (response.finished()) {
        answer.usage = response.usage();
        answer.finish_reason = response.finish_reason();
      }
    }
    answer.status = reader->Finish();
    return answer;
  }

  WorkflowAnswer Ask(const std::string& doc, const std::string& question,
                     v1::AskMode mode = v1::ASK_MODE_DEFAULT,
                     int max_tokens = 8, int64_t as_of = 0) {
    return Ask(Question(doc, question, mode, max_tokens, as_of));
  }

  grpc::Status Delete(const std::string& doc,
                      v1::DeleteDocumentResponse* response = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(Deadline(120));
    v1::DeleteDocumentRequest request;
    request.set_document_id(doc);
    v1::DeleteDocumentResponse ignored;
    return orchestrator_->DeleteDocument(
        &context, request, response != nullptr ? response : &ignored);
  }

  // Calls the decode service directly (its internal API).
  WorkflowAnswer Generate(const v1::GenerateRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(Deadline(120));
    auto reader = decode_->Generate(&context, request);
    WorkflowAnswer answer;
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
      answer.tokens.insert(answer.tokens.end(), response.tokens().begin(),
                           response.tokens().end());
      answer.text += response.text();
      if (response.finished()) {
        answer.usage.set_tokens_prefilled(response.tokens_prefilled());
        answer.usage.set_tokens_decoded(response.tokens_decoded());
      }
    }
    answer.status = reader->Finish();
    return answer;
  }

  v1::DecodeStats DecodeStats() {
    grpc::ClientContext context;
    context.set_deadline(Deadline(30));
    v1::DecodeStats stats;
    decode_->Stats(&context, v1::DecodeStatsRequest(), &stats);
    return stats;
  }

  v1::Orchestrator::Stub& orchestrator() { return *orchestrator_; }
  std::shared_ptr<grpc::Channel> channel() { return channel_; }
  std::shared_ptr<grpc::Channel> internal_channel() {
    return internal_channel_;
  }

  static std::chrono::system_clock::time_point Deadline(int seconds) {
    return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
  }

 private:
  template <typename Stream>
  static IngestResult Finish(Stream* stream) {
    IngestResult result;
    v1::IngestResponse response;
    while (stream->Read(&response)) {
      if (response.has_done()) {
        result.done = response;
      } else {
        result.progress.push_back(response);
      }
    }
    result.status = stream->Finish();
    return result;
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<grpc::Channel> internal_channel_;
  std::unique_ptr<v1::Orchestrator::Stub> orchestrator_;
  std::unique_ptr<v1::Decode::Stub> decode_;
};

}  // namespace twice::testing

#endif  // TWICE_TESTS_SERVICES_WORKFLOW_CLIENT_H_
