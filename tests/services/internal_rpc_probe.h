// Test helper: calls every internal RPC (each data RPC of twice.v1.Store,
// twice.v1.Prefill, twice.v1.Decode) over one channel as one caller,
// aimed at a victim's document, and returns each call's status code. The
// security tests expect none of them to succeed for an outsider.
#ifndef TWICE_TESTS_SERVICES_INTERNAL_RPC_PROBE_H_
#define TWICE_TESTS_SERVICES_INTERNAL_RPC_PROBE_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "twice/v1/decode.grpc.pb.h"
#include "twice/v1/prefill.grpc.pb.h"
#include "twice/v1/store.grpc.pb.h"

namespace twice::testing {

// What the attack aims at: the victim's tenant, document and one of its
// stored state keys.
struct ProbeTarget {
  std::string tenant;
  std::string document_id;
  v1::StateKey state_key;
};

using ProbeResults = std::vector<std::pair<std::string, grpc::StatusCode>>;

inline std::unique_ptr<grpc::ClientContext> ProbeContext(
    const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(30));
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  return context;
}

// `token`: the bearer token the caller sends (empty = none).
inline ProbeResults CallEveryInternalRpc(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& token,
    const ProbeTarget& target) {
  ProbeResults results;
  auto store = v1::Store::NewStub(channel);
  auto prefill = v1::Prefill::NewStub(channel);
  auto decode = v1::Decode::NewStub(channel);
  auto drain = [](auto& reader, auto response) {
    while (reader->Read(&response)) {
    }
    return reader->Finish().error_code();
  };
  {
    auto context = ProbeContext(token);
    v1::PutStateResponse response;
    auto writer = store->PutState(context.get(), &response);
    v1::PutStateRequest request;
    *request.mutable_header()->mutable_key() = target.state_key;
    request.mutable_header()->set_total_bytes(4);
    request.set_chunk("evil");
    writer->Write(request);
    writer->WritesDone();
    results.push_back({"Store/PutState", writer->Finish().error_code()});
  }
  {
    auto context = ProbeContext(token);
    v1::GetStateRequest request;
    *request.mutable_key() = target.state_key;
    auto reader = store->GetState(context.get(), request);
    results.push_back({"Store/GetState", drain(reader, v1::StateChunk())});
  }
  {
    auto context = ProbeContext(token);
    v1::GetStateRequest request;
    *request.mutable_key() = target.state_key;
    auto reader = store->GetStateBlocks(context.get(), request);
    results.push_back(
        {"Store/GetStateBlocks", drain(reader, v1::StateChunk())});
  }
  {
    auto context = ProbeContext(token);
    v1::StatStateRequest request;
    *request.mutable_key() = target.state_key;
    v1::StatStateResponse response;
    results.push_back(
        {"Store/StatState",
         store->StatState(context.get(), request, &response).error_code()});
  }
  {
    auto context = ProbeContext(token);
    v1::DeleteStateRequest request;
    *request.mutable_key() = target.state_key;
    v1::DeleteStateResponse response;
    results.push_back(
        {"Store/DeleteState",
         store->DeleteState(context.get(), request, &response).error_code()});
  }
  {
    auto context = ProbeContext(token);
    v1::PutStateResponse response;
    auto writer = store->PutStateBlocks(context.get(), &response);
    writer->WritesDone();
    results.push_back({"Store/PutStateBlocks", writer->Finish().error_code()});
  }
  {
    auto context = ProbeContext(token);
    v1::PutDocumentResponse response;
    auto writer = store->PutDocument(context.get(), &response);
    v1::PutDocumentRequest request;
    request.mutable_record()->set_tenant(target.tenant);
    request.mutable_record()->mutable_info()->set_document_id(
        target.document_id);
    request.add_tokens(1);
    writer->Write(request);
    writer->WritesDone();
    results.push_back({"Store/PutDocument", writer->Finish().error_code()});
  }
  {
    auto context = ProbeContext(token);
    v1::GetDocumentRecordRequest request;
    request.set_tenant(target.tenant);
    request.set_document_id(target.document_id);
    v1::DocumentRecord response;
    results.push_back(
        {"Store/GetDocument",
         store->GetDocument(context.get(), request, &response).error_code()});
  }
  {
    auto context = ProbeContext(token);
    v1::GetTokensRequest request;
    request.set_tenant(target.tenant);
    request.set_document_id(target.document_id);
    auto reader = store->GetTokens(context.get(), request);
    results.push_back({"Store/GetTokens", drain(reader, v1::TokenChunk())});
  }
  {
    auto context = ProbeContext(token);
    v1::ListDocumentRecordsRequest request;
    request.set_tenant(target.tenant);
    v1::ListDocumentRecordsResponse response;
    results.push_back(
        {"Store/ListDocuments",
         store->ListDocuments(context.get(), request, &response).error_code()});
  }
  {
    auto context = ProbeContext(token);
    v1::DeleteDocumentRecordRequest request;
    request.set_tenant(target.tenant);
    request.set_document_id(target.document_id);
    v1::DeleteStateResponse response;
    results.push_back({"Store/DeleteDocument",
                       store->DeleteDocument(context.get(), request, &response)
                           .error_code()});
  }
  {
    auto context = ProbeContext(token);
    auto stream = prefill->Prefill(context.get());
    v1::PrefillRequest request;
    request.mutable_header()->set_tenant(target.tenant);
    *request.mutable_header()->mutable_parent() = target.state_key;
    request.add_tokens(1);
    stream->Write(request);
    stream->WritesDone();
    results.push_back(
        {"Prefill/Prefill", drain(stream, v1::PrefillResponse())});
  }
  {
    auto context = ProbeContext(token);
    v1::GenerateRequest request;
    request.set_tenant(target.tenant);
    *request.mutable_state() = target.state_key;
    request.add_prompt_tokens(1);
    auto reader = decode->Generate(context.get(), request);
    results.push_back(
        {"Decode/Generate", drain(reader, v1::GenerateResponse())});
  }
  {
    auto context = ProbeContext(token);
    v1::DecodeStats response;
    results.push_back(
        {"Decode/Stats",
         decode->Stats(context.get(), v1::DecodeStatsRequest(), &response)
             .error_code()});
  }
  return results;
}

}  // namespace twice::testing

#endif  // TWICE_TESTS_SERVICES_INTERNAL_RPC_PROBE_H_
