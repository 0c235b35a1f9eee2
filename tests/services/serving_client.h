// Test helper: a client of one real twice-server process (orchestrator and
// store APIs), for the store's fault tests.
#ifndef TWICE_TESTS_SERVICES_SERVING_CLIENT_H_
#define TWICE_TESTS_SERVICES_SERVING_CLIENT_H_

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "twice/v1/orchestrator.grpc.pb.h"
#include "twice/v1/store.grpc.pb.h"

namespace twice::testing {

struct AskResult {
  grpc::Status status;
  std::vector<int32_t> tokens;
  v1::Usage usage;
};

class ServingClient {
 public:
  // `internal_address`: role all's --internal-listen, for the Store's data
  // RPCs (AllStatesStored); empty = the public address, where only the
  // Store's admin RPCs answer.
  explicit ServingClient(const std::string& address,
                         const std::string& internal_address = "")
      : channel_(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
        orchestrator_(v1::Orchestrator::NewStub(channel_)),
        store_(v1::Store::NewStub(channel_)),
        store_data_(v1::Store::NewStub(
            internal_address.empty()
                ? channel_
                : grpc::CreateChannel(internal_address,
                                      grpc::InsecureChannelCredentials()))) {}

  // Ingests `text` under `document_id`; `info` gets the document on success.
  grpc::Status Ingest(const std::string& document_id, const std::string& text,
                      int64_t segment_tokens, bool pin,
                      v1::DocumentInfo* info = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(Deadline(60));
    auto stream = orchestrator_->Ingest(&context);
    v1::IngestRequest request;
    request.mutable_header()->set_document_id(document_id);
    request.mutable_header()->set_segment_tokens(segment_tokens);
    request.mutable_header()->set_pin(pin);
    request.set_text(text);
    stream->Write(request);
    stream->WritesDone();
    v1::IngestResponse response;
    while (stream->Read(&response)) {
      if (response.has_done() && info != nullptr) *info = response.done();
    }
    return stream->Finish();
  }

  AskResult Ask(const std::string& document_id, int max_tokens = 4) {
    grpc::ClientContext context;
    context.set_deadline(Deadline(60));
    v1::AskRequest request;
    request.set_document_id(document_id);
    request.set_question("What is this about?");
    request.mutable_sampling()->set_max_tokens(max_tokens);
    request.mutable_sampling()->set_ignore_eos(true);
    auto reader = orchestrator_->Ask(&context, request);
    AskResult result;
    v1::AskResponse response;
    while (reader->Read(&response)) {
      result.tokens.insert(result.tokens.end(), response.tokens().begin(),
                           response.tokens().end());
      if (response.finished()) result.usage = response.usage();
    }
    result.status = reader->Finish();
    return result;
  }

  grpc::Status GetDocument(const std::string& document_id,
                           v1::DocumentInfo* info) {
    grpc::ClientContext context;
    context.set_deadline(Deadline(30));
    v1::GetDocumentRequest request;
    request.set_document_id(document_id);
    return orchestrator_->GetDocument(&context, request, info);
  }

  std::vector<v1::DocumentInfo> ListDocuments() {
    std::vector<v1::DocumentInfo> all;
    std::string token;
    do {
      grpc::ClientContext context;
      context.set_deadline(Deadline(30));
      v1::ListDocumentsRequest request;
      request.set_page_token(token);
      v1::ListDocumentsResponse response;
      if (!orchestrator_->ListDocuments(&context, request, &response).ok()) {
        break;
      }
      all.insert(all.end(), response.documents().begin(),
                 response.documents().end());
      token = response.next_page_token();
    } while (!token.empty());
    return all;
  }

  // Whether every segment state the document names is stored.
  bool AllStatesStored(const v1::DocumentInfo& info) {
    for (const v1::SegmentBoundary& segment : info.segments()) {
      grpc::ClientContext context;
      context.set_deadline(Deadline(30));
      v1::StatStateRequest request;
      *request.mutable_key() = segment.state_key();
      v1::StatStateResponse response;
      if (!store_data_->StatState(&context, request, &response).ok() ||
          !response.exists()) {
        return false;
      }
    }
    return true;
  }

  v1::StoreStats Stats() {
    grpc::ClientContext context;
    context.set_deadline(Deadline(30));
    v1::StoreStats stats;
    store_->Stats(&context, v1::StoreStatsRequest(), &stats);
    return stats;
  }

  v1::VerifyStoreResponse Verify(bool repair) {
    grpc::ClientContext context;
    context.set_deadline(Deadline(120));
    v1::VerifyStoreRequest request;
    request.set_repair(repair);
    v1::VerifyStoreResponse response;
    store_->Verify(&context, request, &response);
    return response;
  }

  v1::Orchestrator::Stub& orchestrator() { return *orchestrator_; }

 private:
  static std::chrono::system_clock::time_point Deadline(int seconds) {
    return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Orchestrator::Stub> orchestrator_;
  std::unique_ptr<v1::Store::Stub> store_;
  std::unique_ptr<v1::Store::Stub> store_data_;
};

}  // namespace twice::testing

#endif  // TWICE_TESTS_SERVICES_SERVING_CLIENT_H_
