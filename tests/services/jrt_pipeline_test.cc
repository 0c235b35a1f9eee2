// End to end with a JRT-RNN model (`twice init-model --arch=jrt
// --preset=tiny`: encoder length M = 64) beside a Based one, twice-server as
// a separate process on 127.0.0.1:0 with a real RocksDB store:
//   - ingest also prepares the document's prefix-encoded state, which ask
//     mode "prefix" then reuses (and recomputes when it is lost), also after
//     a restart;
//   - "prefix_with_question" encodes question + document as the prefix;
//   - the prefill service makes a prefix chain's first segment the whole
//     encoder, whatever the checkpoint size;
//   - a Based model answers prefix requests with a precise UNIMPLEMENTED.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "storage/rocksdb_store.h"
#include "tests/services/lighthouse_document.h"
#include "tests/services/workflow_client.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"
#include "twice/v1/orchestrator.grpc.pb.h"
#include "twice/v1/prefill.grpc.pb.h"

namespace twice {
namespace {

using testing::CliBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::TempDir;

// About 90 GPT-2 tokens: longer than the encoder (64).
constexpr const char* kDocument = testing::kLighthouseDocument;
// Shorter than the encoder: read left-padded.
constexpr char kShortDocument[] =
    "Marta Vell keeps the lighthouse of Kelloway.";
constexpr const char* kQuestion = testing::kLighthouseQuestion;
constexpr int64_t kSegmentTokens = 32;
constexpr int kMaxTokens = 8;

using Answer = testing::WorkflowAnswer;

// Parameter: --executor (the resident executor reads prefixes on its
// device; the answers are the same).
class JrtPipelineTest : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    models_ = new TempDir();
    for (const char* arch : {"jrt", "based"}) {
      const testing::CommandResult made = RunCommand(
          {CliBinary(), "init-model", std::string("--arch=") + arch,
           "--preset=tiny", "--out=" + models_->path() + "/" + arch, "--json"});
      ASSERT_EQ(made.exit_code, 0) << made.out;
    }
  }
  static void TearDownTestSuite() {
    delete models_;
    models_ = nullptr;
  }

  std::string StoreDir() const { return data_.path() + "/store"; }

  void StartServer() {
    server_ = std::make_unique<ServerProcess>();
    // One list flag: the first model (jrt) is the default.
    ASSERT_TRUE(server_->Start(
        {"--model=jrt=" + models_->path() + "/jrt," +
             "based=" + models_->path() + "/based",
         "--data-dir=" + StoreDir(), "--internal-listen=127.0.0.1:0",
         std::string("--executor=") + GetParam()},
        data_.path() + "/server.log"))
        << server_->stderr_text();
    auto channel = grpc::CreateChannel(server_->address(),
                                       grpc::InsecureChannelCredentials());
    stub_ = v1::Orchestrator::NewStub(channel);
    client_ = std::make_unique<testing::WorkflowClient>(server_->address());
    // Prefill is internal: role all serves it on --internal-listen only.
    prefill_ = v1::Prefill::NewStub(grpc::CreateChannel(
        server_->internal_address(), grpc::InsecureChannelCredentials()));
  }

  int StopServer() {
    stub_.reset();
    client_.reset();
    prefill_.reset();
    return server_->Stop();
  }

  grpc::Status Ingest(const std::string& text, const std::string& model,
                      v1::DocumentInfo* info, bool prepare_prefix = false) {
    grpc::ClientContext context;
    auto stream = stub_->Ingest(&context);
    v1::IngestRequest request;
    request.mutable_header()->set_model(model);
    request.mutable_header()->set_segment_tokens(kSegmentTokens);
    request.mutable_header()->set_prepare_prefix(prepare_prefix);
    request.set_text(text);
    stream->Write(request);
    stream->WritesDone();
    v1::IngestResponse response;
    while (stream->Read(&response)) {
      if (response.has_done()) *info = response.done();
    }
    return stream->Finish();
  }

  v1::DocumentInfo IngestOk(const std::string& text,
                            const std::string& model = "jrt") {
    v1::DocumentInfo info;
    grpc::Status status = Ingest(text, model, &info);
    EXPECT_OK(status);
    return info;
  }

  Answer Ask(const std::string& doc, v1::AskMode mode) {
    return client_->Ask(doc, kQuestion, mode, kMaxTokens);
  }

  int64_t CountTokens(const std::string& text) {
    return testing::CountTokens(models_->path() + "/jrt", text);
  }

  int64_t PromptTokens() {
    return CountTokens(testing::QuestionPrompt(kQuestion));
  }

  // The recorded key of the document's prefix state (server stopped).
  storage::StateKey PrefixKey(const std::string& doc) {
    storage::RocksDbStoreOptions options;
    options.path = StoreDir();
    auto store = storage::OpenRocksDbStore(options);
    EXPECT_OK(store);
    auto record = (*store)->GetDocument({"default", doc});
    EXPECT_OK(record);
    for (const auto& [mode, key] : record->mode_states) {
      if (mode == "prefix") return key;
    }
    ADD_FAILURE() << "no prefix state recorded";
    return {};
  }

  static TempDir* models_;
  TempDir data_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
  std::unique_ptr<v1::Prefill::Stub> prefill_;
  std::unique_ptr<testing::WorkflowClient> client_;
};

TempDir* JrtPipelineTest::models_ = nullptr;

bool HasPrefixMode(const v1::DocumentInfo& info) {
  return std::count(info.prepared_modes().begin(), info.prepared_modes().end(),
                    v1::PREFILL_MODE_PREFIX) == 1;
}

TEST_P(JrtPipelineTest, ModelsDescribeTheirModes) {
  StartServer();
  grpc::ClientContext context;
  v1::ListModelsResponse models;
  ASSERT_OK(stub_->ListModels(&context, {}, &models));
  ASSERT_EQ(models.models_size(), 2);
  for (const v1::ModelInfo& model : models.models()) {
    const bool jrt = model.name() == "jrt";
    EXPECT_EQ(model.architecture(), jrt ? "jrt" : "based");
    const auto& modes = model.modes();
    for (v1::AskMode mode :
         {v1::ASK_MODE_PREFIX, v1::ASK_MODE_PREFIX_WITH_QUESTION}) {
      EXPECT_EQ(std::count(modes.begin(), modes.end(), mode), jrt ? 1 : 0)
          << model.name() << " " << v1::AskMode_Name(mode);
    }
  }
  EXPECT_EQ(StopServer(), 0);
}

TEST_P(JrtPipelineTest, AskPrefixReusesTheStateIngestPrepared) {
  StartServer();
  const int64_t doc_tokens = CountTokens(kDocument);
  ASSERT_GT(doc_tokens, 64);
  const v1::DocumentInfo doc = IngestOk(kDocument);
  EXPECT_EQ(doc.tokens(), doc_tokens);
  EXPECT_TRUE(HasPrefixMode(doc));
  EXPECT_EQ(doc.segments_size(),
            (doc_tokens + kSegmentTokens - 1) / kSegmentTokens);

  const Answer first = Ask(doc.document_id(), v1::ASK_MODE_PREFIX);
  ASSERT_OK(first.status);
  EXPECT_EQ(first.tokens.size(), static_cast<size_t>(kMaxTokens));
  EXPECT_EQ(first.usage.states_reused(), 1);
  EXPECT_EQ(first.usage.states_recomputed(), 0);
  EXPECT_EQ(first.usage.tokens_prefilled(), PromptTokens());
  EXPECT_EQ(first.usage.tokens_reused(), doc_tokens);
  // The causal document state is still there for the default mode.
  const Answer causal = Ask(doc.document_id(), v1::ASK_MODE_DEFAULT);
  ASSERT_OK(causal.status);
  EXPECT_EQ(causal.usage.states_reused(), 1);

  ASSERT_EQ(StopServer(), 0);
  StartServer();
  const Answer after_restart = Ask(doc.document_id(), v1::ASK_MODE_PREFIX);
  ASSERT_TRUE(after_restart.status.ok())
      << after_restart.status.error_message();
  EXPECT_EQ(after_restart.tokens, first.tokens);
  EXPECT_EQ(after_restart.usage.states_reused(), 1);
  EXPECT_EQ(after_restart.usage.tokens_prefilled(), PromptTokens());
  {
    grpc::ClientContext context;
    v1::GetDocumentRequest get;
    get.set_document_id(doc.document_id());
    v1::DocumentInfo info;
    ASSERT_OK(stub_->GetDocument(&context, get, &info));
    EXPECT_TRUE(HasPrefixMode(info));
  }
  // A repeated ingest keeps (and reuses) the prefix state.
  const v1::DocumentInfo again = IngestOk(kDocument);
  EXPECT_EQ(again.document_id(), doc.document_id());
  EXPECT_TRUE(HasPrefixMode(again));
  EXPECT_EQ(StopServer(), 0);
}

TEST_P(JrtPipelineTest, ShortDocumentsAreEncodedLeftPadded) {
  StartServer();
  const int64_t doc_tokens = CountTokens(kShortDocument);
  ASSERT_LT(doc_tokens, 64);
  const v1::DocumentInfo doc = IngestOk(kShortDocument);
  EXPECT_TRUE(HasPrefixMode(doc));
  const Answer answer = Ask(doc.document_id(), v1::ASK_MODE_PREFIX);
  ASSERT_OK(answer.status);
  EXPECT_EQ(answer.usage.states_reused(), 1);
  EXPECT_EQ(answer.usage.tokens_reused(), doc_tokens);  // pads not counted
  EXPECT_EQ(answer.usage.tokens_prefilled(), PromptTokens());
  EXPECT_EQ(answer.tokens.size(), static_cast<size_t>(kMaxTokens));
  EXPECT_EQ(StopServer(), 0);
}

TEST_P(JrtPipelineTest, LostPrefixStateIsRecomputedWithTheSameAnswer) {
  StartServer();
  const v1::DocumentInfo doc = IngestOk(kDocument);
  const Answer before = Ask(doc.document_id(), v1::ASK_MODE_PREFIX);
  ASSERT_OK(before.status);
  ASSERT_EQ(StopServer(), 0);
  {
    const storage::StateKey key = PrefixKey(doc.document_id());
    storage::RocksDbStoreOptions options;
    options.path = StoreDir();
    auto store = storage::OpenRocksDbStore(options);
    ASSERT_OK(store);
    ASSERT_OK((*store)->DeleteState(key));
  }
  StartServer();
  const Answer recovered = Ask(doc.document_id(), v1::ASK_MODE_PREFIX);
  ASSERT_OK(recovered.status);
  EXPECT_EQ(recovered.tokens, before.tokens);
  EXPECT_EQ(recovered.usage.states_recomputed(), 1);
  EXPECT_EQ(recovered.usage.states_reused(), 0);
  EXPECT_EQ(recovered.usage.tokens_prefilled(), doc.tokens() + PromptTokens());
  const Answer next = Ask(doc.document_id(), v1::ASK_MODE_PREFIX);
  ASSERT_OK(next.status);
  EXPECT_EQ(next.tokens, before.tokens);
  EXPECT_EQ(next.usage.states_reused(), 1);
  EXPECT_EQ(next.usage.states_recomputed(), 0);
  EXPECT_EQ(StopServer(), 0);
}

TEST_P(JrtPipelineTest, PrefixWithQuestionEncodesQuestionAndDocument) {
  StartServer();
  const v1::DocumentInfo doc = IngestOk(kDocument);
  const Answer answer =
      Ask(doc.document_id(), v1::ASK_MODE_PREFIX_WITH_QUESTION);
  ASSERT_OK(answer.status);
  const int64_t preamble = CountTokens(testing::ReadTwicePreamble(kQuestion));
  EXPECT_EQ(answer.usage.states_reused(), 0);
  EXPECT_EQ(answer.usage.tokens_prefilled(),
            preamble + doc.tokens() + PromptTokens());
  EXPECT_EQ(answer.tokens.size(), static_cast<size_t>(kMaxTokens));
  // Deterministic: the same ephemeral read gives the same answer.
  const Answer again =
      Ask(doc.document_id(), v1::ASK_MODE_PREFIX_WITH_QUESTION);
  ASSERT_OK(again.status);
  EXPECT_EQ(again.tokens, answer.tokens);
  EXPECT_EQ(StopServer(), 0);
}

TEST_P(JrtPipelineTest, PrefixChainsStartWithTheWholeEncoder) {
  StartServer();
  std::vector<int32_t> tokens(100);
  for (int i = 0; i < 100; ++i) tokens[i] = 1000 + i;
  grpc::ClientContext context;
  auto stream = prefill_->Prefill(&context);
  v1::PrefillRequest request;
  v1::PrefillHeader* header = request.mutable_header();
  header->set_model("jrt");
  header->set_tenant("default");
  header->set_mode(v1::PREFILL_MODE_PREFIX);
  header->set_checkpoint_tokens(16);
  header->set_total_tokens(100);
  request.mutable_tokens()->Add(tokens.begin(), tokens.end());
  stream->Write(request);
  stream->WritesDone();
  std::vector<int64_t> ends;
  v1::PrefillResponse response;
  while (stream->Read(&response)) {
    for (const v1::SegmentBoundary& b : response.checkpoints()) {
      ends.push_back(b.end_token());
    }
  }
  ASSERT_OK(stream->Finish());
  EXPECT_EQ(ends, (std::vector<int64_t>{64, 80, 96, 100}));
  EXPECT_EQ(StopServer(), 0);
}

TEST_P(JrtPipelineTest, BasedModelsAnswerPrefixModesPrecisely) {
  StartServer();
  const v1::DocumentInfo doc = IngestOk(kDocument, "based");
  EXPECT_FALSE(HasPrefixMode(doc));
  for (v1::AskMode mode :
       {v1::ASK_MODE_PREFIX, v1::ASK_MODE_PREFIX_WITH_QUESTION}) {
    const Answer answer = Ask(doc.document_id(), mode);
    EXPECT_EQ(answer.status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_NE(answer.status.error_message().find(
                  "model 'based' (based) has no prefix encoder"),
              std::string::npos)
        << answer.status.error_message();
    EXPECT_NE(answer.status.error_message().find("JRT-RNN"), std::string::npos);
  }
  v1::DocumentInfo ignored;
  grpc::Status prepared = Ingest(kDocument, "based", &ignored, true);
  EXPECT_EQ(prepared.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(prepared.error_message().find("no prefix encoder"),
            std::string::npos);
  // The default mode still answers.
  EXPECT_OK(Ask(doc.document_id(), v1::ASK_MODE_DEFAULT).status);
  EXPECT_EQ(StopServer(), 0);
}

INSTANTIATE_TEST_SUITE_P(Executors, JrtPipelineTest,
                         ::testing::Values("offload", "resident"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

}  // namespace
}  // namespace twice
