// Fuzzes the orchestrator's real request handling: every public RPC
// (Ingest, Append, Ask, BatchAsk, Get/List/Delete/PinDocument) built from
// fuzzed bytes is sent to a real twice-server started in this process
// (role all, a tiny random Based model, a real RocksDB store in a temporary
// directory, small limits so a call stays cheap), over loopback gRPC. A
// call may fail, but only with a status that names a client's mistake:
// UNKNOWN or INTERNAL, a crash, or a server that stops answering is a
// finding. The store's record and state key conversions from their protos
// (FromProto, ValidateDocumentRecord) are fuzzed directly.
// Input: one byte picking the message, then its serialized bytes.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/init_model.h"
#include "services/common/proto_convert.h"
#include "services/server/server.h"
#include "storage/record_validation.h"
#include "tests/fuzz/fuzz_util.h"
#include "twice/v1/orchestrator.grpc.pb.h"
#include "twice/v1/store.pb.h"

namespace {

namespace v1 = twice::v1;

struct Harness {
  std::string dir;
  std::unique_ptr<twice::services::TwiceServer> server;
  std::unique_ptr<v1::Orchestrator::Stub> stub;
};

Harness* g_harness = nullptr;

void RemoveHarnessDir() {
  if (g_harness == nullptr) return;
  std::error_code ec;
  std::filesystem::remove_all(g_harness->dir, ec);
}

// Starts the server once per process. It is never destroyed: libFuzzer ends
// the process with exit(), and only the directory needs cleaning up.
void StartServer() {
  auto* harness = new Harness();
  harness->dir = twice::fuzz::MakeTempDir();
  twice::fuzz::WriteFile(harness->dir + "/tokenizer.json",
                         twice::fuzz::WordLevelTokenizerJson(300));
  twice::engine::InitModelOptions model;
  model.architecture = "based";
  model.preset = "tiny";
  model.out_dir = harness->dir + "/model";
  model.tokenizer_json = harness->dir + "/tokenizer.json";
  model.seed = 7;
  std::filesystem::create_directories(model.out_dir);
  twice::fuzz::CheckOk(twice::engine::WriteRandomModel(model), "model");

  twice::services::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.data_dir = harness->dir + "/store";
  options.models.push_back({"tiny", model.out_dir});
  options.sync_writes = false;
  options.shutdown_grace_seconds = 0;
  options.orchestrator_limits.max_document_tokens = 512;
  options.orchestrator_limits.max_document_bytes = 16 << 10;
  options.orchestrator_limits.max_question_tokens = 64;
  options.orchestrator_limits.max_batch_questions = 4;
  options.orchestrator_limits.max_segments_per_document = 16;
  options.decode_limits.max_new_tokens = 4;
  options.decode_limits.default_max_tokens = 2;
  auto server = twice::services::TwiceServer::Start(options);
  twice::fuzz::CheckOk(server.status(), "server");
  harness->server = *std::move(server);
  harness->stub = v1::Orchestrator::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(harness->server->port()),
      grpc::InsecureChannelCredentials()));
  g_harness = harness;
  std::atexit(RemoveHarnessDir);
}

std::unique_ptr<grpc::ClientContext> Call() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(20));
  return context;
}

// A status the server may answer a bad request with.
void CheckStatus(const grpc::Status& status, const char* rpc) {
  if (status.error_code() == grpc::StatusCode::UNKNOWN ||
      status.error_code() == grpc::StatusCode::INTERNAL ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    twice::fuzz::Die(std::string(rpc) + " answered " +
                     std::to_string(status.error_code()) + ": " +
                     status.error_message());
  }
  if (!status.ok() && status.error_message().empty()) {
    twice::fuzz::Die(std::string(rpc) + " failed without a message");
  }
}

template <typename Stream, typename Response>
grpc::Status Drain(Stream& stream, Response response) {
  while (stream->Read(&response)) {
  }
  return stream->Finish();
}

void Seed(const char* name, uint8_t control,
          const google::protobuf::Message& message) {
  twice::fuzz::MaybeWriteSeed(name, std::string(1, static_cast<char>(control)) +
                                        message.SerializeAsString());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  v1::IngestRequest ingest;
  ingest.mutable_header()->set_model("tiny");
  ingest.mutable_header()->set_document_id("doc-1");
  ingest.mutable_header()->set_segment_tokens(16);
  ingest.mutable_header()->set_pin(true);
  ingest.set_text("w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17");
  Seed("ingest", 0, ingest);
  v1::AppendRequest append;
  append.set_document_id("doc-1");
  append.add_tokens(5);
  append.add_tokens(6);
  Seed("append", 1, append);
  v1::AskRequest ask;
  ask.set_document_id("doc-1");
  ask.set_question("w3 w4");
  ask.set_mode(v1::ASK_MODE_READ_TWICE);
  ask.set_as_of_tokens(3);
  ask.mutable_sampling()->set_max_tokens(2);
  Seed("ask", 2, ask);
  v1::BatchAskRequest batch;
  batch.set_document_id("doc-1");
  batch.add_questions()->set_question("w5");
  batch.add_questions()->add_question_tokens(7);
  Seed("batch_ask", 3, batch);
  v1::ListDocumentsRequest list;
  list.set_page_size(10);
  list.set_page_token("doc-0");
  Seed("list", 6, list);
  v1::DocumentRecord record;
  record.set_tenant("default");
  record.set_segment_tokens(128);
  record.set_model_fingerprint(std::string(64, 'a'));
  Seed("record", 7, record);
  v1::PinDocumentRequest pin;
  pin.set_document_id("doc-1");
  pin.set_pinned(true);
  Seed("pin", 9, pin);
  StartServer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  v1::Orchestrator::Stub& stub = *g_harness->stub;
  switch (data[0] % 10) {
    case 0: {
      // The fuzzed message is the first (header) message; the stream's
      // second message repeats it without the header, so mixing text and
      // tokens across messages is exercised too.
      v1::IngestRequest r;
      if (!r.ParseFromString(bytes)) return 0;
      auto context = Call();
      auto stream = stub.Ingest(context.get());
      stream->Write(r);
      if (r.has_header() && (r.text().size() + r.tokens_size()) % 2 == 1) {
        v1::IngestRequest more = r;
        more.clear_header();
        stream->Write(more);
      }
      stream->WritesDone();
      CheckStatus(Drain(stream, v1::IngestResponse()), "Ingest");
      break;
    }
    case 1: {
      v1::AppendRequest r;
      if (!r.ParseFromString(bytes)) return 0;
      auto context = Call();
      auto stream = stub.Append(context.get());
      stream->Write(r);
      stream->WritesDone();
      CheckStatus(Drain(stream, v1::IngestResponse()), "Append");
      break;
    }
    case 2: {
      v1::AskRequest r;
      if (!r.ParseFromString(bytes)) return 0;
      auto context = Call();
      auto reader = stub.Ask(context.get(), r);
      CheckStatus(Drain(reader, v1::AskResponse()), "Ask");
      break;
    }
    case 3: {
      v1::BatchAskRequest r;
      if (!r.ParseFromString(bytes)) return 0;
      auto context = Call();
      auto reader = stub.BatchAsk(context.get(), r);
      CheckStatus(Drain(reader, v1::BatchAskResponse()), "BatchAsk");
      break;
    }
    case 4: {
      v1::GetDocumentRequest r;
      if (!r.ParseFromString(bytes)) return 0;
      v1::DocumentInfo response;
      CheckStatus(stub.GetDocument(Call().get(), r, &response), "GetDocument");
      break;
    }
    case 5: {
      v1::DeleteDocumentRequest r;
      if (!r.ParseFromString(bytes)) return 0;
      v1::DeleteDocumentResponse response;
      CheckStatus(stub.DeleteDocument(Call().get(), r, &response),
                  "DeleteDocument");
      break;
    }
    case 6: {
      v1::ListDocumentsRequest r;
      if (!r.ParseFromString(bytes)) return 0;
      v1::ListDocumentsResponse response;
      CheckStatus(stub.ListDocuments(Call().get(), r, &response),
                  "ListDocuments");
      break;
    }
    case 7: {
      v1::DocumentRecord r;
      if (!r.ParseFromString(bytes)) return 0;
      auto record = twice::services::FromProto(r);
      if (record.ok()) {
        (void)twice::storage::ValidateDocumentRecord(*record);
        (void)twice::services::ToProto(*record);
      }
      break;
    }
    case 8: {
      v1::StateKey r;
      if (!r.ParseFromString(bytes)) return 0;
      auto key = twice::services::FromProto(r);
      if (key.ok()) (void)twice::services::ToProto(*key);
      break;
    }
    case 9: {
      v1::PinDocumentRequest r;
      if (!r.ParseFromString(bytes)) return 0;
      v1::DocumentInfo response;
      CheckStatus(stub.PinDocument(Call().get(), r, &response), "PinDocument");
      break;
    }
  }
  // Whatever the request did, the server still answers.
  v1::ListModelsResponse models;
  const grpc::Status alive =
      stub.ListModels(Call().get(), v1::ListModelsRequest(), &models);
  if (!alive.ok()) {
    twice::fuzz::Die("the server stopped answering: " + alive.error_message());
  }
  return 0;
}
