// End to end with a Mamba-2 model (`twice init-model --arch=mamba2
// --preset=tiny`: SSD chunk 64, fixed-size conv + SSM state) served by
// twice-server as a separate process on 127.0.0.1:0 with a real RocksDB
// store: ingest stores the document's states; ask in the default and
// read-twice modes reuses them; after a restart the same question gives the
// same answer from the stored state; ListModels offers no prefix modes and
// prefix asks are a precise UNIMPLEMENTED.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/server_process.h"
#include "tests/testing/status_matchers.h"
#include "twice/v1/orchestrator.grpc.pb.h"

namespace twice {
namespace {

using testing::CliBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::TempDir;

// About 90 GPT-2 tokens: more than one SSD chunk of the tiny preset (64)
// and three stored segments.
constexpr char kDocument[] =
    "The harbour town of Kelloway sits at the mouth of a cold green river. "
    "Its lighthouse stands on the northern breakwater, a white tower with a "
    "red lamp room. The keeper of the lighthouse is Marta Vell, who climbs "
    "the one hundred and twelve steps every evening to light the lamp. The "
    "town has three bakeries, a fish market and a library that was once a "
    "customs house.";
constexpr char kQuestion[] = "Who keeps the lighthouse?";
constexpr int64_t kSegmentTokens = 32;
constexpr int kMaxTokens = 8;

struct Answer {
  grpc::Status status;
  std::vector<int32_t> tokens;
  v1::Usage usage;
};

class Mamba2PipelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new TempDir();
    const testing::CommandResult made =
        RunCommand({CliBinary(), "init-model", "--arch=mamba2", "--preset=tiny",
                    "--out=" + models_->path() + "/mamba2", "--json"});
    ASSERT_EQ(made.exit_code, 0) << made.out;
  }
  static void TearDownTestSuite() {
    delete models_;
    models_ = nullptr;
  }

  void StartServer() {
    server_ = std::make_unique<ServerProcess>();
    ASSERT_TRUE(server_->Start({"--model=mamba2=" + models_->path() + "/mamba2",
                                "--data-dir=" + data_.path() + "/store"},
                               data_.path() + "/server.log"))
        << server_->stderr_text();
    stub_ = v1::Orchestrator::NewStub(grpc::CreateChannel(
        server_->address(), grpc::InsecureChannelCredentials()));
  }

  int StopServer() {
    stub_.reset();
    return server_->Stop();
  }

  v1::DocumentInfo IngestOk(const std::string& text) {
    grpc::ClientContext context;
    auto stream = stub_->Ingest(&context);
    v1::IngestRequest request;
    request.mutable_header()->set_model("mamba2");
    request.mutable_header()->set_segment_tokens(kSegmentTokens);
    request.set_text(text);
    stream->Write(request);
    stream->WritesDone();
    v1::DocumentInfo info;
    v1::IngestResponse response;
    while (stream->Read(&response)) {
      if (response.has_done()) info = response.done();
    }
    const grpc::Status status = stream->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info;
  }

  Answer Ask(const std::string& doc, v1::AskMode mode) {
    v1::AskRequest request;
    request.set_document_id(doc);
    request.set_question(kQuestion);
    request.set_mode(mode);
    request.mutable_sampling()->set_max_tokens(kMaxTokens);
    request.mutable_sampling()->set_ignore_eos(true);
    grpc::ClientContext context;
    auto reader = stub_->Ask(&context, request);
    Answer answer;
    v1::AskResponse response;
    while (reader->Read(&response)) {
      answer.tokens.insert(answer.tokens.end(), response.tokens().begin(),
                           response.tokens().end());
      if (response.finished()) answer.usage = response.usage();
    }
    answer.status = reader->Finish();
    return answer;
  }

  int64_t CountTokens(const std::string& text) {
    auto tokenizer =
        engine::Tokenizer::FromFile(models_->path() + "/mamba2/tokenizer.json");
    EXPECT_OK(tokenizer);
    auto ids = (*tokenizer)->Encode(text);
    EXPECT_TRUE(ids.ok());
    return static_cast<int64_t>(ids->size());
  }

  static TempDir* models_;
  TempDir data_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
};

TempDir* Mamba2PipelineTest::models_ = nullptr;

TEST_F(Mamba2PipelineTest, ListsMamba2WithoutPrefixModes) {
  StartServer();
  grpc::ClientContext context;
  v1::ListModelsResponse models;
  ASSERT_TRUE(stub_->ListModels(&context, {}, &models).ok());
  ASSERT_EQ(models.models_size(), 1);
  const v1::ModelInfo& model = models.models(0);
  EXPECT_EQ(model.architecture(), "mamba2");
  const auto& modes = model.modes();
  EXPECT_EQ(std::count(modes.begin(), modes.end(), v1::ASK_MODE_DEFAULT), 1);
  EXPECT_EQ(std::count(modes.begin(), modes.end(), v1::ASK_MODE_READ_TWICE), 1);
  for (v1::AskMode mode :
       {v1::ASK_MODE_PREFIX, v1::ASK_MODE_PREFIX_WITH_QUESTION}) {
    EXPECT_EQ(std::count(modes.begin(), modes.end(), mode), 0)
        << v1::AskMode_Name(mode);
  }
  EXPECT_EQ(StopServer(), 0);
}

TEST_F(Mamba2PipelineTest, IngestAskRestartAskReusesTheState) {
  StartServer();
  const int64_t doc_tokens = CountTokens(kDocument);
  ASSERT_GT(doc_tokens, 64);
  const v1::DocumentInfo doc = IngestOk(kDocument);
  EXPECT_EQ(doc.tokens(), doc_tokens);
  EXPECT_EQ(doc.segments_size(),
            (doc_tokens + kSegmentTokens - 1) / kSegmentTokens);
  const int64_t prompt =
      CountTokens(std::string("\n\nQuestion: ") + kQuestion + "\nAnswer:");

  const Answer first = Ask(doc.document_id(), v1::ASK_MODE_DEFAULT);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_EQ(first.tokens.size(), static_cast<size_t>(kMaxTokens));
  EXPECT_EQ(first.usage.states_reused(), 1);
  EXPECT_EQ(first.usage.states_recomputed(), 0);
  EXPECT_EQ(first.usage.tokens_reused(), doc_tokens);
  EXPECT_EQ(first.usage.tokens_prefilled(), prompt);

  // Read-twice: the first read comes from the store, the second is
  // prefilled after it (state passing over a non-empty SSM state).
  const Answer twice = Ask(doc.document_id(), v1::ASK_MODE_READ_TWICE);
  ASSERT_TRUE(twice.status.ok()) << twice.status.error_message();
  const int64_t preamble =
      CountTokens(std::string("\n\nQuestion: ") + kQuestion + "\n\n");
  EXPECT_EQ(twice.usage.states_reused(), 1);
  EXPECT_EQ(twice.usage.tokens_prefilled(), preamble + doc_tokens + prompt);
  EXPECT_EQ(twice.tokens.size(), static_cast<size_t>(kMaxTokens));

  ASSERT_EQ(StopServer(), 0);
  StartServer();
  const Answer after_restart = Ask(doc.document_id(), v1::ASK_MODE_DEFAULT);
  ASSERT_TRUE(after_restart.status.ok())
      << after_restart.status.error_message();
  EXPECT_EQ(after_restart.tokens, first.tokens);
  EXPECT_EQ(after_restart.usage.states_reused(), 1);
  EXPECT_EQ(after_restart.usage.states_recomputed(), 0);
  EXPECT_EQ(after_restart.usage.tokens_prefilled(), prompt);
  const Answer twice_again = Ask(doc.document_id(), v1::ASK_MODE_READ_TWICE);
  ASSERT_TRUE(twice_again.status.ok());
  EXPECT_EQ(twice_again.tokens, twice.tokens);
  EXPECT_EQ(StopServer(), 0);
}

TEST_F(Mamba2PipelineTest, PrefixModesAreUnimplemented) {
  StartServer();
  const v1::DocumentInfo doc = IngestOk(kDocument);
  for (v1::AskMode mode :
       {v1::ASK_MODE_PREFIX, v1::ASK_MODE_PREFIX_WITH_QUESTION}) {
    const Answer answer = Ask(doc.document_id(), mode);
    EXPECT_EQ(answer.status.error_code(), grpc::StatusCode::UNIMPLEMENTED)
        << answer.status.error_message();
    EXPECT_NE(answer.status.error_message().find("no prefix encoder"),
              std::string::npos)
        << answer.status.error_message();
  }
  EXPECT_EQ(StopServer(), 0);
}

}  // namespace
}  // namespace twice
