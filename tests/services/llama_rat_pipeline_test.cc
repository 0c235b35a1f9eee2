// End to end with the Llama baseline and RAT (`twice init-model
// --arch=llama|rat --preset=tiny`, plus the interleaved RAT-SWA
// `--preset=tiny-swa`), twice-server as a separate process on 127.0.0.1:0
// with a real RocksDB store: ingest stores the document's state (a growing
// full KV cache for llama, closed chunks + open chunk for RAT), ask reuses
// it, and after a restart the same question gets the same answer from the
// stored state, not a recomputation.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

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

// About 90 GPT-2 tokens: several RAT chunks (L 16) and a partial one.
constexpr char kDocument[] =
    "The harbour town of Kelloway sits at the mouth of a cold green river. "
    "Its lighthouse stands on the northern breakwater, a white tower with a "
    "red lamp room. The keeper of the lighthouse is Marta Vell, who climbs "
    "the one hundred and twelve steps every evening to light the lamp. The "
    "town has three bakeries, a fish market and a library that was once a "
    "customs house.";
constexpr char kQuestion[] = "Who keeps the lighthouse?";
constexpr int64_t kSegmentTokens = 24;  // not a multiple of the chunk (16)
constexpr int kMaxTokens = 8;

struct Answer {
  grpc::Status status;
  std::vector<int32_t> tokens;
  v1::Usage usage;
};

class LlamaRatPipelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new TempDir();
    for (const auto& [name, arch, preset] :
         {std::tuple{"llama", "llama", "tiny"},
          std::tuple{"rat", "rat", "tiny"},
          std::tuple{"ratswa", "rat", "tiny-swa"}}) {
      const testing::CommandResult made =
          RunCommand({CliBinary(), "init-model", std::string("--arch=") + arch,
                      std::string("--preset=") + preset,
                      "--out=" + models_->path() + "/" + name, "--json"});
      ASSERT_EQ(made.exit_code, 0) << made.out;
    }
  }
  static void TearDownTestSuite() {
    delete models_;
    models_ = nullptr;
  }

  void StartServer() {
    server_ = std::make_unique<ServerProcess>();
    const std::string m = models_->path();
    ASSERT_TRUE(server_->Start({"--model=llama=" + m + "/llama,rat=" + m +
                                    "/rat,ratswa=" + m + "/ratswa",
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

  v1::DocumentInfo IngestOk(const std::string& model) {
    grpc::ClientContext context;
    auto stream = stub_->Ingest(&context);
    v1::IngestRequest request;
    request.mutable_header()->set_model(model);
    request.mutable_header()->set_segment_tokens(kSegmentTokens);
    request.set_text(kDocument);
    stream->Write(request);
    stream->WritesDone();
    v1::IngestResponse response;
    v1::DocumentInfo info;
    while (stream->Read(&response)) {
      if (response.has_done()) info = response.done();
    }
    const grpc::Status status = stream->Finish();
    EXPECT_TRUE(status.ok()) << model << ": " << status.error_message();
    return info;
  }

  Answer Ask(const std::string& doc) {
    v1::AskRequest request;
    request.set_document_id(doc);
    request.set_question(kQuestion);
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

  int64_t DocumentTokens() {
    auto tokenizer =
        engine::Tokenizer::FromFile(models_->path() + "/llama/tokenizer.json");
    EXPECT_OK(tokenizer);
    auto ids = (*tokenizer)->Encode(kDocument);
    EXPECT_TRUE(ids.ok());
    return static_cast<int64_t>(ids->size());
  }

  static TempDir* models_;
  TempDir data_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
};

TempDir* LlamaRatPipelineTest::models_ = nullptr;

TEST_F(LlamaRatPipelineTest, ListsTheArchitectures) {
  StartServer();
  grpc::ClientContext context;
  v1::ListModelsResponse models;
  ASSERT_TRUE(stub_->ListModels(&context, {}, &models).ok());
  ASSERT_EQ(models.models_size(), 3);
  for (const v1::ModelInfo& model : models.models()) {
    EXPECT_EQ(model.architecture(), model.name() == "llama" ? "llama" : "rat");
  }
  EXPECT_EQ(StopServer(), 0);
}

TEST_F(LlamaRatPipelineTest, IngestAskRestartAskReusesTheState) {
  const int64_t doc_tokens = DocumentTokens();
  ASSERT_GT(doc_tokens, 3 * 16);
  StartServer();
  std::vector<std::string> docs;
  std::vector<Answer> first;
  for (const char* model : {"llama", "rat", "ratswa"}) {
    SCOPED_TRACE(model);
    const v1::DocumentInfo doc = IngestOk(model);
    EXPECT_EQ(doc.tokens(), doc_tokens);
    docs.push_back(doc.document_id());
    const Answer a = Ask(doc.document_id());
    ASSERT_TRUE(a.status.ok()) << a.status.error_message();
    EXPECT_EQ(a.tokens.size(), static_cast<size_t>(kMaxTokens));
    EXPECT_EQ(a.usage.states_reused(), 1);
    EXPECT_EQ(a.usage.states_recomputed(), 0);
    EXPECT_EQ(a.usage.tokens_reused(), doc_tokens);
    first.push_back(a);
  }
  ASSERT_EQ(StopServer(), 0);
  StartServer();
  for (size_t i = 0; i < docs.size(); ++i) {
    SCOPED_TRACE(i);
    const Answer again = Ask(docs[i]);
    ASSERT_TRUE(again.status.ok()) << again.status.error_message();
    EXPECT_EQ(again.tokens, first[i].tokens);
    EXPECT_EQ(again.usage.states_reused(), 1);
    EXPECT_EQ(again.usage.states_recomputed(), 0);
    EXPECT_EQ(again.usage.tokens_reused(), doc_tokens);
  }
  EXPECT_EQ(StopServer(), 0);
}

}  // namespace
}  // namespace twice
