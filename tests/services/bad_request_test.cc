// Every request field an outsider controls, with bad values, against a real
// twice-server (role all, tiny Based model, real RocksDB): public RPCs on
// the public listener, internal ones on --internal-listen. Each answers a
// clear status (never OK, UNKNOWN or INTERNAL, always with a message), and
// the server is still SERVING afterwards.
#include <grpcpp/create_channel.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"
#include "twice/v1/decode.grpc.pb.h"
#include "twice/v1/orchestrator.grpc.pb.h"
#include "twice/v1/prefill.grpc.pb.h"
#include "twice/v1/store.grpc.pb.h"

namespace twice::services {
namespace {

using testing::CliBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::TempDir;

constexpr int kMaxNewTokens = 32;
constexpr int kMaxQuestionTokens = 16;
constexpr char kBadRequestDocument[] =
    "The cat sat on the mat while the dog slept by the door. The key is "
    "under the blue stone. ";

std::unique_ptr<grpc::ClientContext> Call() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(60));
  return context;
}

class BadRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const testing::CommandResult made =
        RunCommand({CliBinary(), "init-model", "--arch=based", "--preset=tiny",
                    "--out=" + dir_->path() + "/model", "--json"});
    ASSERT_EQ(made.exit_code, 0) << made.out;
    server_ = new ServerProcess();
    ASSERT_TRUE(server_->Start(
        {"--model=" + dir_->path() + "/model",
         "--data-dir=" + dir_->path() + "/data",
         "--internal-listen=127.0.0.1:0",
         "--max-new-tokens=" + std::to_string(kMaxNewTokens),
         "--max-question-tokens=" + std::to_string(kMaxQuestionTokens),
         "--max-document-tokens=4096"},
        dir_->path() + "/server.log"))
        << server_->stderr_text();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    public_ = grpc::CreateChannel(server_->address(),
                                  grpc::InsecureChannelCredentials());
    internal_ = grpc::CreateChannel(server_->internal_address(),
                                    grpc::InsecureChannelCredentials());
    orchestrator_ = v1::Orchestrator::NewStub(public_);
  }

  // A refused request: a clear code, a message, and the server still up.
  void ExpectRefused(const grpc::Status& status, const std::string& what,
                     std::vector<grpc::StatusCode> allowed = {
                         grpc::StatusCode::INVALID_ARGUMENT}) {
    SCOPED_TRACE(what);
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.error_code(), grpc::StatusCode::UNKNOWN)
        << status.error_message();
    EXPECT_NE(status.error_code(), grpc::StatusCode::INTERNAL)
        << status.error_message();
    bool expected = false;
    for (grpc::StatusCode code : allowed)
      expected |= status.error_code() == code;
    EXPECT_TRUE(expected) << "code " << status.error_code() << ": "
                          << status.error_message();
    EXPECT_FALSE(status.error_message().empty());
    ExpectServing();
  }

  void ExpectServing() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    v1::ListModelsResponse models;
    EXPECT_TRUE(
        orchestrator_->ListModels(&context, v1::ListModelsRequest(), &models)
            .ok())
        << "the server stopped answering: " << server_->stderr_text();
  }

  grpc::Status Ingest(const std::vector<v1::IngestRequest>& messages) {
    auto context = Call();
    auto stream = orchestrator_->Ingest(context.get());
    for (const v1::IngestRequest& message : messages) stream->Write(message);
    stream->WritesDone();
    v1::IngestResponse response;
    while (stream->Read(&response)) {
      if (response.has_done()) document_ = response.done();
    }
    return stream->Finish();
  }

  v1::IngestRequest Header(int64_t segment_tokens = 0,
                           const std::string& model = "") {
    v1::IngestRequest request;
    request.mutable_header()->set_segment_tokens(segment_tokens);
    request.mutable_header()->set_model(model);
    request.mutable_header()->set_document_id("doc");
    request.set_text(kBadRequestDocument);
    return request;
  }

  // The stored document, ingested once.
  const v1::DocumentInfo& Document() {
    if (document_.document_id().empty()) {
      EXPECT_OK(Ingest({Header()}));
    }
    return document_;
  }

  grpc::Status Ask(const v1::AskRequest& request) {
    auto context = Call();
    auto reader = orchestrator_->Ask(context.get(), request);
    v1::AskResponse response;
    while (reader->Read(&response)) {
    }
    return reader->Finish();
  }

  v1::AskRequest Question() {
    v1::AskRequest request;
    request.set_document_id(Document().document_id());
    request.set_question("Where is the key?");
    request.mutable_sampling()->set_max_tokens(2);
    return request;
  }

  grpc::Status BatchAsk(int questions) {
    v1::BatchAskRequest request;
    request.set_document_id(Document().document_id());
    for (int i = 0; i < questions; ++i) {
      request.add_questions()->set_question("Where?");
      request.mutable_questions(i)->mutable_sampling()->set_max_tokens(1);
    }
    auto context = Call();
    auto reader = orchestrator_->BatchAsk(context.get(), request);
    v1::BatchAskResponse response;
    while (reader->Read(&response)) {
    }
    return reader->Finish();
  }

  static TempDir* dir_;
  static ServerProcess* server_;
  std::shared_ptr<grpc::Channel> public_;
  std::shared_ptr<grpc::Channel> internal_;
  std::unique_ptr<v1::Orchestrator::Stub> orchestrator_;
  v1::DocumentInfo document_;
};

TempDir* BadRequestTest::dir_ = nullptr;
ServerProcess* BadRequestTest::server_ = nullptr;

TEST_F(BadRequestTest, IngestFields) {
  ExpectRefused(
      Ingest({Header(0, "no-such-model")}), "unknown model",
      {grpc::StatusCode::NOT_FOUND, grpc::StatusCode::INVALID_ARGUMENT});
  ExpectRefused(Ingest({Header(-5)}), "negative segment_tokens");
  ExpectRefused(Ingest({Header(3)}), "segment_tokens below the minimum");
  v1::IngestRequest tokens_too;
  tokens_too.add_tokens(1);
  ExpectRefused(Ingest({Header(), tokens_too}), "text and tokens mixed");
  v1::IngestRequest no_header;
  no_header.set_text(kBadRequestDocument);
  ExpectRefused(Ingest({no_header}), "no header");
  v1::IngestRequest bad_id = Header();
  bad_id.mutable_header()->set_document_id(std::string(1000, 'x'));
  ExpectRefused(Ingest({bad_id}), "document id too long");
  v1::IngestRequest out_of_vocabulary = Header();
  out_of_vocabulary.clear_text();
  out_of_vocabulary.add_tokens(1 << 30);
  ExpectRefused(Ingest({out_of_vocabulary}), "token outside the vocabulary");
  // A later message that is not valid protobuf (invalid UTF-8 in a string
  // field; the client library sends it with a logged error) ends the
  // stream for the server like a last message. With total_size announced
  // the ingest fails instead of storing the document cut short.
  v1::IngestRequest header = Header();
  header.mutable_header()->set_document_id("cut-short");
  header.mutable_header()->set_total_size(
      static_cast<int64_t>(header.text().size()) + 16);
  v1::IngestRequest broken;
  broken.set_text("more \xff\xfe text");
  ExpectRefused(Ingest({header, broken}), "a message lost mid-stream");
  {
    v1::GetDocumentRequest request;
    request.set_document_id("cut-short");
    v1::DocumentInfo info;
    EXPECT_EQ(
        orchestrator_->GetDocument(Call().get(), request, &info).error_code(),
        grpc::StatusCode::NOT_FOUND)
        << "stored: " << info.tokens() << " tokens";
  }
  v1::IngestRequest announced = Header();
  announced.mutable_header()->set_total_size(3);
  ExpectRefused(Ingest({announced}), "total_size that does not match");
  v1::IngestRequest huge = Header();
  huge.clear_text();
  for (int i = 0; i < 5000; ++i) huge.add_tokens(1);
  ExpectRefused(Ingest({huge}), "more than --max-document-tokens",
                {grpc::StatusCode::RESOURCE_EXHAUSTED});
}

TEST_F(BadRequestTest, AskAndBatchAskFields) {
  v1::AskRequest too_many_tokens = Question();
  too_many_tokens.mutable_sampling()->set_max_tokens(kMaxNewTokens + 1);
  ExpectRefused(
      Ask(too_many_tokens), "max_tokens above --max-new-tokens",
      {grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::OUT_OF_RANGE});
  v1::AskRequest negative_tokens = Question();
  negative_tokens.mutable_sampling()->set_max_tokens(-1);
  ExpectRefused(Ask(negative_tokens), "negative max_tokens");
  v1::AskRequest long_question = Question();
  std::string words;
  for (int i = 0; i < 4 * kMaxQuestionTokens; ++i) words += "where ";
  long_question.set_question(words);
  ExpectRefused(Ask(long_question), "question above --max-question-tokens",
                {grpc::StatusCode::INVALID_ARGUMENT,
                 grpc::StatusCode::RESOURCE_EXHAUSTED});
  v1::AskRequest negative_as_of = Question();
  negative_as_of.set_as_of_tokens(-3);
  ExpectRefused(Ask(negative_as_of), "negative as_of_tokens");
  v1::AskRequest past_end = Question();
  past_end.set_as_of_tokens(Document().tokens() + 100);
  ExpectRefused(
      Ask(past_end), "as_of_tokens past the end",
      {grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::OUT_OF_RANGE});
  v1::AskRequest bad_top_k = Question();
  bad_top_k.mutable_sampling()->set_top_k(-2);
  ExpectRefused(Ask(bad_top_k), "negative top_k");
  for (float top_p : {-0.5f, 1.5f}) {
    v1::AskRequest bad_top_p = Question();
    bad_top_p.mutable_sampling()->set_top_p(top_p);
    ExpectRefused(Ask(bad_top_p), "top_p " + std::to_string(top_p));
  }
  v1::AskRequest bad_temperature = Question();
  bad_temperature.mutable_sampling()->set_temperature(-1);
  ExpectRefused(Ask(bad_temperature), "negative temperature");
  v1::AskRequest bad_mode = Question();
  bad_mode.set_mode(static_cast<v1::AskMode>(97));
  ExpectRefused(Ask(bad_mode), "unknown mode");
  v1::AskRequest no_question = Question();
  no_question.clear_question();
  ExpectRefused(Ask(no_question), "empty question");
  v1::AskRequest missing = Question();
  missing.set_document_id("no-such-document");
  ExpectRefused(Ask(missing), "unknown document",
                {grpc::StatusCode::NOT_FOUND});
  ExpectRefused(BatchAsk(0), "BatchAsk without questions");
  ExpectRefused(BatchAsk(65), "BatchAsk above 64 questions",
                {grpc::StatusCode::INVALID_ARGUMENT,
                 grpc::StatusCode::RESOURCE_EXHAUSTED});
}

TEST_F(BadRequestTest, CatalogFields) {
  for (int page_size : {-1, 100000}) {
    v1::ListDocumentsRequest request;
    request.set_page_size(page_size);
    v1::ListDocumentsResponse response;
    ExpectRefused(
        orchestrator_->ListDocuments(Call().get(), request, &response),
        "page_size " + std::to_string(page_size));
  }
  v1::ListDocumentsRequest bad_token;
  bad_token.set_page_token("\x01garbage\x7f/../");
  v1::ListDocumentsResponse listed;
  const grpc::Status token_status =
      orchestrator_->ListDocuments(Call().get(), bad_token, &listed);
  // A page token is an opaque cursor: a made-up one lists from there or is
  // refused, never an internal error.
  EXPECT_NE(token_status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_NE(token_status.error_code(), grpc::StatusCode::UNKNOWN);
  v1::GetDocumentRequest empty_id;
  v1::DocumentInfo info;
  ExpectRefused(
      orchestrator_->GetDocument(Call().get(), empty_id, &info),
      "empty document id",
      {grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::NOT_FOUND});
}

TEST_F(BadRequestTest, StoreFields) {
  auto store = v1::Store::NewStub(internal_);
  {
    auto context = Call();
    v1::PutStateResponse response;
    auto writer = store->PutState(context.get(), &response);
    v1::PutStateRequest request;
    request.mutable_header()->mutable_key()->set_digest(std::string(32, 'a'));
    request.mutable_header()->set_total_bytes(100);
    request.set_chunk(std::string(10, 'x'));
    writer->Write(request);
    writer->WritesDone();
    ExpectRefused(writer->Finish(), "PutState shorter than total_bytes");
  }
  {
    auto context = Call();
    v1::PutStateResponse response;
    auto writer = store->PutState(context.get(), &response);
    v1::PutStateRequest request;
    request.mutable_header()->mutable_key()->set_digest("short");
    request.mutable_header()->set_total_bytes(1);
    request.set_chunk("x");
    writer->Write(request);
    writer->WritesDone();
    ExpectRefused(writer->Finish(), "PutState with a malformed key");
  }
  for (const std::vector<int64_t>& sizes :
       {std::vector<int64_t>{4, 4}, std::vector<int64_t>{-1},
        std::vector<int64_t>{}}) {
    auto context = Call();
    v1::PutStateResponse response;
    auto writer = store->PutStateBlocks(context.get(), &response);
    v1::PutStateBlocksRequest request;
    request.mutable_header()->mutable_key()->set_digest(std::string(32, 'b'));
    for (int64_t size : sizes) request.mutable_header()->add_block_bytes(size);
    request.set_chunk("12345");
    writer->Write(request);
    writer->WritesDone();
    ExpectRefused(writer->Finish(), "PutStateBlocks with wrong block_bytes");
  }
  {
    auto context = Call();
    v1::PutDocumentResponse response;
    auto writer = store->PutDocument(context.get(), &response);
    v1::PutDocumentRequest request;
    request.mutable_record()->set_tenant("default");
    request.mutable_record()->mutable_info()->set_document_id("too-long");
    request.mutable_record()->mutable_info()->set_tokens(3);
    for (int i = 0; i < 10; ++i) request.add_tokens(1);
    writer->Write(request);
    writer->WritesDone();
    ExpectRefused(writer->Finish(),
                  "PutDocument with more tokens than the record says");
  }
  {
    v1::ListDocumentRecordsRequest request;
    v1::ListDocumentRecordsResponse response;
    ExpectRefused(store->ListDocuments(Call().get(), request, &response),
                  "store ListDocuments without a tenant");
  }
}

TEST_F(BadRequestTest, PrefillAndGenerateFields) {
  auto prefill = v1::Prefill::NewStub(internal_);
  auto run_prefill = [&](const v1::PrefillRequest& request) {
    auto context = Call();
    auto stream = prefill->Prefill(context.get());
    stream->Write(request);
    stream->WritesDone();
    v1::PrefillResponse response;
    while (stream->Read(&response)) {
    }
    return stream->Finish();
  };
  for (const std::vector<int64_t>& at :
       {std::vector<int64_t>{3, 2, 4}, std::vector<int64_t>{2, 9},
        std::vector<int64_t>{0, 4}, std::vector<int64_t>{-1, 4}}) {
    v1::PrefillRequest request;
    request.mutable_header()->set_tenant("default");
    request.mutable_header()->set_total_tokens(4);
    for (int64_t n : at) request.mutable_header()->add_checkpoint_at(n);
    for (int i = 0; i < 4; ++i) request.add_tokens(1);
    ExpectRefused(run_prefill(request), "Prefill with a bad checkpoint_at");
  }
  {
    v1::PrefillRequest request;
    request.mutable_header()->set_tenant("default");
    request.mutable_header()->set_total_tokens(2);
    request.mutable_header()->set_checkpoint_tokens(-4);
    request.add_tokens(1);
    request.add_tokens(2);
    ExpectRefused(run_prefill(request), "Prefill with negative checkpoints");
  }
  auto decode = v1::Decode::NewStub(internal_);
  const v1::DocumentInfo& doc = Document();
  ASSERT_GT(doc.segments_size(), 0);
  auto generate = [&](const v1::GenerateRequest& request) {
    auto context = Call();
    auto reader = decode->Generate(context.get(), request);
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
    }
    return reader->Finish();
  };
  v1::GenerateRequest long_prompt;
  long_prompt.set_tenant("default");
  *long_prompt.mutable_state() =
      doc.segments(doc.segments_size() - 1).state_key();
  for (int i = 0; i < 200000; ++i) long_prompt.add_prompt_tokens(1);
  long_prompt.mutable_sampling()->set_max_tokens(1);
  ExpectRefused(generate(long_prompt), "Generate over its prompt limit",
                {grpc::StatusCode::INVALID_ARGUMENT,
                 grpc::StatusCode::RESOURCE_EXHAUSTED});
  v1::GenerateRequest bad_sampling = long_prompt;
  bad_sampling.clear_prompt_tokens();
  bad_sampling.add_prompt_tokens(1);
  bad_sampling.mutable_sampling()->set_top_p(7);
  ExpectRefused(generate(bad_sampling), "Generate with top_p 7");
  // A prefix read encodes from the empty state: with a state it is refused
  // before anything is read.
  v1::GenerateRequest prefix_on_state = bad_sampling;
  prefix_on_state.mutable_sampling()->set_top_p(0);
  prefix_on_state.add_read_tokens(1);
  prefix_on_state.set_read_mode(v1::PREFILL_MODE_PREFIX);
  ExpectRefused(generate(prefix_on_state), "Generate prefix read on a state");
  v1::GenerateRequest unknown_mode = prefix_on_state;
  unknown_mode.set_read_mode(static_cast<v1::PrefillMode>(7));
  ExpectRefused(generate(unknown_mode), "Generate with read_mode 7");
  v1::GenerateRequest bad_read = prefix_on_state;
  bad_read.set_read_mode(v1::PREFILL_MODE_CAUSAL);
  bad_read.add_read_tokens(-3);
  ExpectRefused(generate(bad_read), "Generate reading token id -3");
}

// The CLI checks a file is UTF-8 before sending it, and says where it is
// not and what to do instead.
TEST_F(BadRequestTest, CliRefusesNonUtf8Files) {
  const std::string path = dir_->path() + "/latin1.txt";
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("caf\xe9 au lait", f);
    std::fclose(f);
  }
  const testing::CommandResult result =
      RunCommand({CliBinary(), "ingest", path, "--server=" + server_->address(),
                  "--json"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.out.find("not UTF-8"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("byte 3"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("token ids"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("header"), std::string::npos) << result.out;

  // Valid UTF-8 is cut into messages between characters: a two-byte
  // character straddling the first 1 MiB piece still arrives whole (the
  // document is then refused for its size, not for a broken message).
  const std::string big = dir_->path() + "/big.txt";
  {
    FILE* f = std::fopen(big.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    // 1 MiB - 1 bytes of short words ((2^20 - 1) is a multiple of 3).
    std::string filler;
    for (int i = 0; i < ((1 << 20) - 1) / 3; ++i) filler += "ab ";
    std::fputs(filler.c_str(), f);
    std::fputs("\xc3\xa9 the end", f);
    std::fclose(f);
  }
  const testing::CommandResult split = RunCommand(
      {CliBinary(), "ingest", big, "--server=" + server_->address(), "--json"});
  EXPECT_EQ(split.exit_code, 1);
  EXPECT_NE(split.out.find("max_document_tokens"), std::string::npos)
      << split.out;
}

}  // namespace
}  // namespace twice::services
