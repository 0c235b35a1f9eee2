// End to end: twice-server as a separate process on 127.0.0.1:0 with a real
// RocksDB store and a random-weight Based model; a document goes in over
// gRPC, a repeated ingest reuses its segments, questions resume from its
// stored state, and the server survives bad input and a corrupt state. The
// ask, restart, ask path of every architecture is
// architecture_pipeline_test.cc.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "storage/rocksdb_store.h"
#include "tests/services/lighthouse_document.h"
#include "tests/services/workflow_client.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"
#include "twice/v1/orchestrator.grpc.pb.h"

namespace twice {
namespace {

using testing::CliBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::TempDir;

constexpr char kPipelineDocument[] =
    "The harbour town of Kelloway sits at the mouth of a cold green river. "
    "Its lighthouse stands on the northern breakwater, a white tower with a "
    "red lamp room. The keeper of the lighthouse is Marta Vell, who climbs "
    "the one hundred and twelve steps every evening to light the lamp. The "
    "town has three bakeries, a fish market and a library that was once a "
    "customs house. Every year on the first Saturday of June the town holds "
    "the Lamp Festival, which began in 1911.";
constexpr char kPipelineQuestion[] = "Who keeps the lighthouse?";
constexpr int64_t kPipelineSegmentTokens = 32;

using Answer = testing::WorkflowAnswer;

class PipelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new TempDir();
    const testing::CommandResult made =
        RunCommand({CliBinary(), "init-model", "--arch=based", "--preset=tiny",
                    "--out=" + model_dir_->path() + "/model", "--json"});
    ASSERT_EQ(made.exit_code, 0) << made.out;
  }
  static void TearDownTestSuite() {
    delete model_dir_;
    model_dir_ = nullptr;
  }

  std::string ModelDir() const { return model_dir_->path() + "/model"; }
  std::string StoreDir() const { return data_.path() + "/store"; }

  void StartServer(std::vector<std::string> extra = {}) {
    server_ = std::make_unique<ServerProcess>();
    extra.push_back("--model=" + ModelDir());
    extra.push_back("--data-dir=" + StoreDir());
    ASSERT_TRUE(server_->Start(extra, data_.path() + "/server.log"))
        << server_->stderr_text();
    stub_ = v1::Orchestrator::NewStub(grpc::CreateChannel(
        server_->address(), grpc::InsecureChannelCredentials()));
    client_ = std::make_unique<testing::WorkflowClient>(server_->address());
  }

  int StopServer() {
    stub_.reset();
    client_.reset();
    return server_->Stop();
  }

  grpc::Status Ingest(const std::vector<v1::IngestRequest>& messages,
                      v1::IngestResponse* done,
                      std::vector<v1::IngestResponse>* progress = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(120));
    auto stream = stub_->Ingest(&context);
    for (const v1::IngestRequest& message : messages) {
      if (!stream->Write(message)) break;
    }
    stream->WritesDone();
    v1::IngestResponse response;
    while (stream->Read(&response)) {
      if (response.has_done()) {
        *done = response;
      } else if (progress != nullptr) {
        progress->push_back(response);
      }
    }
    return stream->Finish();
  }

  v1::IngestResponse IngestText(const std::string& text,
                                int64_t segment = kPipelineSegmentTokens) {
    v1::IngestRequest request;
    request.mutable_header()->set_segment_tokens(segment);
    request.set_text(text);
    v1::IngestResponse done;
    grpc::Status status = Ingest({request}, &done);
    EXPECT_OK(status);
    return done;
  }

  Answer Ask(const std::string& doc, const std::string& question,
             v1::AskMode mode = v1::ASK_MODE_DEFAULT, int max_tokens = 8) {
    return client_->Ask(doc, question, mode, max_tokens);
  }
  Answer AskRequest(const v1::AskRequest& request) {
    return client_->Ask(request);
  }
  int64_t CountTokens(const std::string& text) {
    return testing::CountTokens(ModelDir(), text);
  }

  bool Healthy() {
    auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
        server_->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckResponse response;
    return health->Check(&context, {}, &response).ok() &&
           response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  }

  static TempDir* model_dir_;
  TempDir data_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
  std::unique_ptr<testing::WorkflowClient> client_;
};

TempDir* PipelineTest::model_dir_ = nullptr;

TEST_F(PipelineTest, RepeatedIngestReusesEverySegment) {
  StartServer();
  const v1::IngestResponse first = IngestText(kPipelineDocument);
  EXPECT_EQ(first.segments_reused(), 0);
  const v1::IngestResponse again = IngestText(kPipelineDocument);
  EXPECT_EQ(again.done().document_id(), first.done().document_id());
  EXPECT_EQ(again.segments_reused(), again.segments_total());
  // A longer document with the same prefix shares its whole segments.
  const v1::IngestResponse longer = IngestText(std::string(kPipelineDocument) +
                                               " The river freezes in winter.");
  EXPECT_NE(longer.done().document_id(), first.done().document_id());
  EXPECT_EQ(longer.segments_reused(),
            first.done().tokens() / kPipelineSegmentTokens);
}

TEST_F(PipelineTest, ReadTwiceRereadsTheDocumentAfterTheQuestion) {
  StartServer();
  const v1::DocumentInfo doc = IngestText(kPipelineDocument).done();
  const Answer answer =
      Ask(doc.document_id(), kPipelineQuestion, v1::ASK_MODE_READ_TWICE);
  ASSERT_OK(answer.status);
  const int64_t preamble =
      CountTokens(testing::ReadTwicePreamble(kPipelineQuestion));
  const int64_t prompt =
      CountTokens(testing::QuestionPrompt(kPipelineQuestion));
  // First read cached; the second read and the prompt are prefilled.
  EXPECT_EQ(answer.usage.states_reused(), 1);
  EXPECT_EQ(answer.usage.tokens_prefilled(), preamble + doc.tokens() + prompt);
  EXPECT_EQ(answer.tokens.size(), 8u);

  const Answer full =
      Ask(doc.document_id(), kPipelineQuestion, v1::ASK_MODE_READ_TWICE_FULL);
  ASSERT_OK(full.status);
  EXPECT_EQ(full.usage.states_reused(), 0);
  EXPECT_EQ(full.usage.tokens_prefilled(),
            preamble + 2 * doc.tokens() + CountTokens("\n\n") + prompt);
}

TEST_F(PipelineTest, CorruptStateIsRecomputedWithTheSameAnswer) {
  StartServer();
  const v1::DocumentInfo doc = IngestText(kPipelineDocument).done();
  const Answer before = Ask(doc.document_id(), kPipelineQuestion);
  ASSERT_OK(before.status);
  ASSERT_EQ(StopServer(), 0);

  // Overwrite the last two document states with bytes that are well-formed
  // store values but not valid engine states: the ask must walk back past
  // both (the earlier one is only found bad when the prefill loads it).
  ASSERT_GE(doc.segments_size(), 3);
  {
    storage::RocksDbStoreOptions options;
    options.path = StoreDir();
    auto store = storage::OpenRocksDbStore(options);
    ASSERT_OK(store);
    for (int back = 1; back <= 2; ++back) {
      auto key = storage::StateKey::FromBytes(
          doc.segments(doc.segments_size() - back).state_key().digest());
      ASSERT_OK(key);
      auto blob = (*store)->GetState(*key);
      ASSERT_OK(blob);
      std::string corrupt = *blob;
      corrupt[corrupt.size() / 2] ^= 0x5a;
      ASSERT_OK((*store)->PutState(*key, corrupt, {}));
    }
  }

  StartServer();
  const Answer recovered = Ask(doc.document_id(), kPipelineQuestion);
  ASSERT_OK(recovered.status);
  EXPECT_EQ(recovered.tokens, before.tokens);
  EXPECT_GE(recovered.usage.states_recomputed(), 2);
  const Answer next = Ask(doc.document_id(), kPipelineQuestion);
  ASSERT_OK(next.status);
  EXPECT_EQ(next.tokens, before.tokens);
  EXPECT_EQ(next.usage.states_recomputed(), 0);
  EXPECT_EQ(next.usage.states_reused(), 1);
}

TEST_F(PipelineTest, BadInputGetsPreciseStatusAndServerKeepsServing) {
  StartServer({"--max-document-bytes=100000"});
  const v1::DocumentInfo doc = IngestText(kPipelineDocument).done();

  Answer unknown = Ask("doc-does-not-exist", kPipelineQuestion);
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(unknown.status.error_message().find("doc-does-not-exist"),
            std::string::npos);

  Answer bad_id = Ask("bad id/../x", kPipelineQuestion);
  EXPECT_EQ(bad_id.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::IngestResponse done;
  v1::IngestRequest empty;
  empty.mutable_header();
  EXPECT_EQ(Ingest({empty}, &done).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1::IngestRequest bad_tokens;
  bad_tokens.mutable_header();
  bad_tokens.add_tokens(5);
  bad_tokens.add_tokens(1 << 30);
  grpc::Status status = Ingest({bad_tokens}, &done);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("outside the vocabulary"),
            std::string::npos);

  v1::IngestRequest no_header;
  no_header.set_text("text without a header");
  EXPECT_EQ(Ingest({no_header}, &done).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  std::vector<v1::IngestRequest> oversized(3);
  oversized[0].mutable_header();
  for (v1::IngestRequest& message : oversized) {
    message.set_text(std::string(60000, 'a'));
  }
  status = Ingest(oversized, &done);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("max_document_bytes"),
            std::string::npos);

  v1::AskRequest unknown_mode;
  unknown_mode.set_document_id(doc.document_id());
  unknown_mode.set_question(kPipelineQuestion);
  unknown_mode.set_mode(static_cast<v1::AskMode>(99));
  EXPECT_EQ(AskRequest(unknown_mode).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  Answer prefix =
      Ask(doc.document_id(), kPipelineQuestion, v1::ASK_MODE_PREFIX);
  EXPECT_EQ(prefix.status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(prefix.status.error_message().find("no prefix encoder"),
            std::string::npos);

  v1::AskRequest bad_question;
  bad_question.set_document_id(doc.document_id());
  bad_question.add_question_tokens(-1);
  EXPECT_EQ(AskRequest(bad_question).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1::AskRequest empty_question;
  empty_question.set_document_id(doc.document_id());
  EXPECT_EQ(AskRequest(empty_question).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1::AskRequest bad_sampling;
  bad_sampling.set_document_id(doc.document_id());
  bad_sampling.set_question(kPipelineQuestion);
  bad_sampling.mutable_sampling()->set_temperature(-1);
  EXPECT_EQ(AskRequest(bad_sampling).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // Still serving, and the good document still answers.
  EXPECT_TRUE(Healthy());
  EXPECT_OK(Ask(doc.document_id(), kPipelineQuestion).status);
}

TEST_F(PipelineTest, BatchAskAnswersEveryQuestionWithItsIndex) {
  StartServer();
  const v1::DocumentInfo doc = IngestText(kPipelineDocument).done();
  const Answer single = Ask(doc.document_id(), kPipelineQuestion);
  ASSERT_OK(single.status);

  v1::BatchAskRequest request;
  request.set_document_id(doc.document_id());
  for (v1::AskMode mode : {v1::ASK_MODE_DEFAULT, v1::ASK_MODE_READ_TWICE}) {
    v1::BatchQuestion* question = request.add_questions();
    question->set_question(kPipelineQuestion);
    question->set_mode(mode);
    question->mutable_sampling()->set_max_tokens(8);
    question->mutable_sampling()->set_ignore_eos(true);
  }
  grpc::ClientContext context;
  auto reader = stub_->BatchAsk(&context, request);
  std::vector<std::vector<int32_t>> tokens(2);
  std::vector<v1::Usage> usage(2);
  v1::BatchAskResponse response;
  while (reader->Read(&response)) {
    ASSERT_GE(response.index(), 0);
    ASSERT_LT(response.index(), 2);
    auto& out = tokens[response.index()];
    out.insert(out.end(), response.response().tokens().begin(),
               response.response().tokens().end());
    if (response.response().finished()) {
      usage[response.index()] = response.response().usage();
    }
  }
  ASSERT_OK(reader->Finish());
  EXPECT_EQ(tokens[0], single.tokens);
  EXPECT_EQ(tokens[1].size(), 8u);
  EXPECT_EQ(usage[0].states_reused(), 1);
  EXPECT_GT(usage[1].tokens_prefilled(), doc.tokens());
}

TEST_F(PipelineTest, DocumentsCanBeListedPinnedAndDeleted) {
  StartServer();
  const v1::DocumentInfo doc = IngestText(kPipelineDocument).done();
  {
    grpc::ClientContext context;
    v1::PinDocumentRequest pin;
    pin.set_document_id(doc.document_id());
    pin.set_pinned(true);
    v1::DocumentInfo pinned;
    ASSERT_OK(stub_->PinDocument(&context, pin, &pinned));
    EXPECT_TRUE(pinned.pinned());
  }
  {
    grpc::ClientContext context;
    v1::GetDocumentRequest get;
    get.set_document_id(doc.document_id());
    v1::DocumentInfo info;
    ASSERT_OK(stub_->GetDocument(&context, get, &info));
    EXPECT_TRUE(info.pinned());
    EXPECT_EQ(info.tokens(), doc.tokens());
  }
  grpc::ClientContext list_context;
  v1::ListDocumentsResponse listed;
  ASSERT_OK(stub_->ListDocuments(&list_context, {}, &listed));
  ASSERT_EQ(listed.documents_size(), 1);
  EXPECT_EQ(listed.documents(0).document_id(), doc.document_id());

  grpc::ClientContext delete_context;
  v1::DeleteDocumentRequest request;
  request.set_document_id(doc.document_id());
  v1::DeleteDocumentResponse deleted;
  ASSERT_OK(stub_->DeleteDocument(&delete_context, request, &deleted));
  EXPECT_EQ(deleted.states_deleted(), doc.segments_size());
  EXPECT_EQ(Ask(doc.document_id(), kPipelineQuestion).status.error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(PipelineTest, CliSpeaksJson) {
  StartServer();
  const std::string file = data_.path() + "/doc.txt";
  std::ofstream(file) << kPipelineDocument;
  const std::string server = "--server=" + server_->address();
  testing::CommandResult ingest = RunCommand(
      {CliBinary(), "ingest", file, server, "--json", "--segment-tokens=32"});
  ASSERT_EQ(ingest.exit_code, 0);
  const nlohmann::json ingested = nlohmann::json::parse(ingest.out);
  ASSERT_TRUE(ingested.contains("doc_id"));
  EXPECT_EQ(ingested["tokens"].get<int64_t>(), CountTokens(kPipelineDocument));

  testing::CommandResult ask =
      RunCommand({CliBinary(), "ask", ingested["doc_id"].get<std::string>(),
                  kPipelineQuestion, server, "--json", "--max-tokens=4"});
  ASSERT_EQ(ask.exit_code, 0);
  const nlohmann::json answer = nlohmann::json::parse(ask.out);
  ASSERT_TRUE(answer.contains("answer"));
  for (const char* key : {"tokens_prefilled", "tokens_decoded", "states_reused",
                          "states_recomputed", "ttft_ms"}) {
    EXPECT_TRUE(answer["usage"].contains(key)) << key;
  }
  EXPECT_EQ(answer["usage"]["states_reused"].get<int64_t>(), 1);

  testing::CommandResult missing = RunCommand(
      {CliBinary(), "ask", "doc-missing", kPipelineQuestion, server, "--json"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(nlohmann::json::parse(missing.out)["error"]["code"], "NOT_FOUND");

  testing::CommandResult health =
      RunCommand({CliBinary(), "health", server, "--json"});
  EXPECT_EQ(health.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(health.out)["status"], "SERVING");
}

TEST_F(PipelineTest, BrokenModelDirectoryFailsStartupWithTheTensorNamed) {
  TempDir broken;
  std::filesystem::copy(ModelDir(), broken.path() + "/model");
  // Change the width in config.json so every tensor is mis-shaped.
  std::ifstream in(broken.path() + "/model/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  in.close();
  config["n_embd"] = config["n_embd"].get<int>() * 2;
  std::ofstream(broken.path() + "/model/config.json") << config.dump();

  ServerProcess server;
  EXPECT_FALSE(server.Start(
      {"--model=" + broken.path() + "/model", "--data-dir=" + StoreDir()},
      data_.path() + "/broken.log"));
  EXPECT_NE(server.exit_code(), 0);
  EXPECT_NE(server.stderr_text().find("transformer."), std::string::npos)
      << server.stderr_text();
}

}  // namespace
}  // namespace twice
