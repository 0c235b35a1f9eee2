// Orchestrator workflows end to end, twice-server as a separate process on
// 127.0.0.1:0 with a real RocksDB store and a random-weight Based model:
//   - Append prefills only the new tokens from the document's last state,
//     continues its chain of boundaries and answers like a one-shot ingest
//     of the whole token sequence;
//   - a lost state is recomputed along the RECORDED boundaries (not a
//     uniform grid after an Append) and lands on the recorded keys;
//   - as_of_tokens answers over a document prefix from the nearest stored
//     boundary at or before it;
//   - an ingest cancelled midway resumes from its stored segments when
//     repeated, with the same document id and answers;
//   - prompt templates come from the model's config.json;
//   - second reads and as-of tails run in the decode call and store
//     nothing, so asks answer while the store refuses writes.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "services/store/remote_state_store.h"
#include "tests/services/workflow_client.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"

namespace twice {
namespace {

using testing::CliBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::TempDir;
using testing::WorkflowClient;

constexpr char kQuestion[] = "What happens next?";

// Deterministic token ids below the GPT-2 end-of-text token.
std::vector<int32_t> Tokens(int n, uint64_t seed) {
  std::vector<int32_t> out(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = static_cast<int32_t>((s >> 33) % 50000);
  }
  return out;
}

std::vector<int32_t> Concat(std::vector<int32_t> a,
                            const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<int64_t> Ends(const v1::DocumentInfo& info) {
  std::vector<int64_t> out;
  for (const v1::SegmentBoundary& s : info.segments())
    out.push_back(s.end_token());
  return out;
}

class WorkflowTest : public ::testing::Test {
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

  static std::string ModelDir() { return model_dir_->path() + "/model"; }

  std::unique_ptr<ServerProcess> Start(const std::string& name,
                                       const std::string& model_dir) {
    auto server = std::make_unique<ServerProcess>();
    EXPECT_TRUE(server->Start(
        {"--model=" + model_dir, "--data-dir=" + data_.path() + "/" + name,
         "--internal-listen=127.0.0.1:0"},
        data_.path() + "/" + name + ".log"))
        << server->stderr_text();
    return server;
  }

  void StartServer() {
    server_ = Start("store", ModelDir());
    client_ = std::make_unique<WorkflowClient>(server_->address(),
                                               server_->internal_address());
  }

  int64_t CountTokens(const std::string& text) {
    auto tokenizer =
        engine::Tokenizer::FromFile(ModelDir() + "/tokenizer.json");
    EXPECT_OK(tokenizer);
    auto ids = (*tokenizer)->Encode(text);
    EXPECT_OK(ids);
    return static_cast<int64_t>(ids->size());
  }
  int64_t PromptTokens() {
    return CountTokens(std::string("\n\nQuestion: ") + kQuestion + "\nAnswer:");
  }

  static TempDir* model_dir_;
  TempDir data_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<WorkflowClient> client_;
};

TempDir* WorkflowTest::model_dir_ = nullptr;

TEST_F(WorkflowTest, AppendContinuesTheChainAndAnswersLikeOneShotIngest) {
  StartServer();
  const std::vector<int32_t> a = Tokens(100, 1), b = Tokens(70, 2);
  const auto ingested = client_->Ingest(a, 32, "grown");
  ASSERT_OK(ingested.status);
  const auto appended = client_->Append("grown", b, 32);
  ASSERT_OK(appended.status);
  const v1::DocumentInfo& info = appended.done.done();
  EXPECT_EQ(info.tokens(), 170);
  // The old boundaries stay; the new ones continue from the old end.
  EXPECT_EQ(Ends(info), (std::vector<int64_t>{32, 64, 96, 100, 132, 164, 170}));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(info.segments(i).state_key().digest(),
              ingested.done.done().segments(i).state_key().digest());
  }
  ASSERT_FALSE(appended.progress.empty());
  EXPECT_GT(appended.progress.front().tokens_done(), 100);
  EXPECT_EQ(appended.progress.front().tokens_total(), 170);

  ASSERT_OK(client_->Ingest(Concat(a, b), 0, "one-shot").status);
  const auto grown = client_->Ask("grown", kQuestion);
  const auto one_shot = client_->Ask("one-shot", kQuestion);
  ASSERT_OK(grown.status);
  ASSERT_OK(one_shot.status);
  EXPECT_EQ(grown.tokens, one_shot.tokens);
  EXPECT_EQ(grown.usage.states_reused(), 1);
  EXPECT_EQ(grown.usage.tokens_reused(), 170);
  EXPECT_EQ(grown.usage.tokens_prefilled(), PromptTokens());

  // Text is tokenized on its own and appended to the stored tokens.
  const std::string more = " The lamp was lit at dusk.";
  const auto text = client_->Append("grown", {}, 0, more);
  ASSERT_OK(text.status);
  EXPECT_EQ(text.done.done().tokens(), 170 + CountTokens(more));
  EXPECT_TRUE(text.done.done().text_sha256().empty());

  EXPECT_EQ(client_->Append("missing-doc", b, 0).status.error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(client_->Append("grown", {}, 0).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(client_->Append("grown", {1 << 30}, 0).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(WorkflowTest, LostStatesAreRecomputedAlongTheRecordedBoundaries) {
  StartServer();
  ASSERT_OK(client_->Ingest(Tokens(100, 1), 32, "grown").status);
  const auto appended = client_->Append("grown", Tokens(70, 2), 32);
  ASSERT_OK(appended.status);
  const auto before = client_->Ask("grown", kQuestion);
  ASSERT_OK(before.status);

  // Lose every state after the first boundary.
  services::RemoteStateStore store(client_->internal_channel(),
                                   std::chrono::seconds(30));
  const v1::DocumentInfo& info = appended.done.done();
  for (int i = 1; i < info.segments_size(); ++i) {
    auto key =
        storage::StateKey::FromBytes(info.segments(i).state_key().digest());
    ASSERT_OK(key);
    ASSERT_OK(store.DeleteState(*key));
  }
  // A fresh server: the decode service's cache of the state it answered
  // from would otherwise serve the next question without the store.
  client_.reset();
  server_.reset();
  StartServer();
  // Recomputing on a uniform grid from token 32 would land on other keys
  // (boundaries 100 and 170 are off the grid); the orchestrator checks.
  const auto after = client_->Ask("grown", kQuestion);
  ASSERT_OK(after.status);
  EXPECT_EQ(after.tokens, before.tokens);
  EXPECT_EQ(after.usage.states_recomputed(), 6);
  EXPECT_EQ(after.usage.tokens_reused(), 32);
  EXPECT_EQ(after.usage.tokens_prefilled(), 170 - 32 + PromptTokens());
  services::RemoteStateStore restarted(client_->internal_channel(),
                                       std::chrono::seconds(30));
  for (const v1::SegmentBoundary& segment : info.segments()) {
    auto key = storage::StateKey::FromBytes(segment.state_key().digest());
    auto has = restarted.HasState(*key);
    ASSERT_OK(has);
    EXPECT_TRUE(*has) << "boundary " << segment.end_token();
  }
  const auto again = client_->Ask("grown", kQuestion);
  EXPECT_EQ(again.usage.states_recomputed(), 0);
  EXPECT_EQ(again.tokens, before.tokens);
}

TEST_F(WorkflowTest, AsOfTokensAnswersOverTheDocumentPrefix) {
  StartServer();
  const std::vector<int32_t> doc = Tokens(170, 3);
  ASSERT_OK(client_->Ingest(doc, 32, "full").status);
  for (int64_t as_of : {100, 64, 10}) {
    const std::string prefix_id = "prefix-" + std::to_string(as_of);
    ASSERT_TRUE(
        client_
            ->Ingest(std::vector<int32_t>(doc.begin(), doc.begin() + as_of), 32,
                     prefix_id)
            .status.ok());
    for (v1::AskMode mode : {v1::ASK_MODE_DEFAULT, v1::ASK_MODE_READ_TWICE}) {
      const auto got = client_->Ask("full", kQuestion, mode, 8, as_of);
      const auto want = client_->Ask(prefix_id, kQuestion, mode);
      ASSERT_OK(got.status);
      ASSERT_OK(want.status);
      EXPECT_EQ(got.tokens, want.tokens)
          << "as_of " << as_of << " mode " << mode;
    }
    // Resumes from the nearest boundary at or before the position and
    // prefills only the rest.
    const int64_t boundary = as_of / 32 * 32;
    const auto usage =
        client_->Ask("full", kQuestion, v1::ASK_MODE_DEFAULT, 8, as_of).usage;
    EXPECT_EQ(usage.tokens_reused(), boundary) << as_of;
    EXPECT_EQ(usage.states_reused(), boundary > 0 ? 1 : 0) << as_of;
    EXPECT_EQ(usage.tokens_prefilled(), as_of - boundary + PromptTokens())
        << as_of;
  }
  EXPECT_EQ(client_->Ask("full", kQuestion, v1::ASK_MODE_DEFAULT, 8, 171)
                .status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// The decode service reads a request's read tokens after its state and
// before its prompt, in chunks (past 8192 tokens) that give the same
// answer as one read.
TEST_F(WorkflowTest, GenerateReadsItsReadTokensBeforeThePrompt) {
  StartServer();
  const std::vector<int32_t> prompt = Tokens(5, 10);
  for (int n : {50, 9000}) {
    const std::vector<int32_t> doc = Tokens(n, 9);
    v1::GenerateRequest read;
    read.set_tenant("default");
    read.mutable_read_tokens()->Add(doc.begin(), doc.end());
    read.mutable_prompt_tokens()->Add(prompt.begin(), prompt.end());
    read.mutable_sampling()->set_max_tokens(8);
    read.mutable_sampling()->set_ignore_eos(true);
    v1::GenerateRequest whole = read;
    whole.clear_read_tokens();
    whole.clear_prompt_tokens();
    const std::vector<int32_t> all = Concat(doc, prompt);
    whole.mutable_prompt_tokens()->Add(all.begin(), all.end());
    const auto got = client_->Generate(read);
    const auto want = client_->Generate(whole);
    ASSERT_OK(got.status);
    ASSERT_OK(want.status);
    EXPECT_EQ(got.tokens.size(), 8u);
    EXPECT_EQ(got.tokens, want.tokens) << n;
    EXPECT_EQ(got.usage.tokens_prefilled(), n + 5);
  }
}

// Every mode's second read (and an as-of tail) runs in the answering call:
// with a store that refuses every write (its disk "full"), each still
// answers as before.
TEST_F(WorkflowTest, AsksStoreNothingAndAnswerUnderAFullDisk) {
  StartServer();
  const std::vector<int32_t> doc = Tokens(170, 5);
  ASSERT_OK(client_->Ingest(doc, 32, "doc").status);
  struct Case {
    v1::AskMode mode;
    int64_t as_of;
  };
  const std::vector<Case> cases = {{v1::ASK_MODE_DEFAULT, 0},
                                   {v1::ASK_MODE_READ_TWICE, 0},
                                   {v1::ASK_MODE_READ_TWICE_FULL, 0},
                                   {v1::ASK_MODE_DEFAULT, 100},
                                   {v1::ASK_MODE_READ_TWICE, 100}};
  std::vector<std::vector<int32_t>> before;
  for (const Case& c : cases) {
    const auto answer = client_->Ask("doc", kQuestion, c.mode, 8, c.as_of);
    ASSERT_OK(answer.status);
    before.push_back(answer.tokens);
  }
  const auto read_twice =
      client_->Ask("doc", kQuestion, v1::ASK_MODE_READ_TWICE);
  // The second read is the preamble, the document and the prompt, all read
  // by the decode service; the first read is the stored state.
  EXPECT_EQ(read_twice.usage.tokens_reused(), 170);
  EXPECT_GT(read_twice.usage.tokens_prefilled(), 170 + PromptTokens());

  client_.reset();
  server_.reset();
  server_ = std::make_unique<ServerProcess>();
  ASSERT_TRUE(server_->Start(
      {"--model=" + ModelDir(), "--data-dir=" + data_.path() + "/store",
       "--internal-listen=127.0.0.1:0",
       "--store_min_free_disk_bytes=1152921504606846976"},
      data_.path() + "/full.log"))
      << server_->stderr_text();
  client_ = std::make_unique<WorkflowClient>(server_->address(),
                                             server_->internal_address());
  // The store does refuse writes.
  EXPECT_EQ(client_->Ingest(Tokens(40, 6), 32, "new").status.error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto answer =
        client_->Ask("doc", kQuestion, cases[i].mode, 8, cases[i].as_of);
    ASSERT_TRUE(answer.status.ok())
        << "mode " << cases[i].mode << " as_of " << cases[i].as_of << ": "
        << answer.status.error_message();
    EXPECT_EQ(answer.tokens, before[i])
        << "mode " << cases[i].mode << " as_of " << cases[i].as_of;
  }
}

TEST_F(WorkflowTest, CancelledIngestResumesFromItsStoredSegments) {
  StartServer();
  const std::vector<int32_t> doc = Tokens(40000, 4);
  {
    grpc::ClientContext context;
    auto stream = client_->orchestrator().Ingest(&context);
    v1::IngestRequest request;
    request.mutable_header()->set_segment_tokens(256);
    request.mutable_tokens()->Add(doc.begin(), doc.end());
    stream->Write(request);
    stream->WritesDone();
    v1::IngestResponse progress;
    ASSERT_TRUE(stream->Read(&progress));
    ASSERT_FALSE(progress.has_done());
    context.TryCancel();
    while (stream->Read(&progress)) {
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  {
    // No record was written for the interrupted ingest.
    grpc::ClientContext context;
    v1::ListDocumentsResponse listed;
    ASSERT_TRUE(
        client_->orchestrator().ListDocuments(&context, {}, &listed).ok());
    EXPECT_EQ(listed.documents_size(), 0);
  }
  const auto resumed = client_->Ingest(doc, 256);
  ASSERT_OK(resumed.status);
  const int64_t total = resumed.done.segments_total();
  EXPECT_GT(resumed.done.segments_reused(), 0);
  EXPECT_LT(resumed.done.segments_reused(), total);

  // The same document and answer as an uninterrupted ingest elsewhere.
  std::unique_ptr<ServerProcess> fresh = Start("fresh", ModelDir());
  WorkflowClient fresh_client(fresh->address());
  const auto whole = fresh_client.Ingest(doc, 256);
  ASSERT_OK(whole.status);
  EXPECT_EQ(whole.done.done().document_id(), resumed.done.done().document_id());
  EXPECT_EQ(whole.done.segments_reused(), 0);
  const std::string id = resumed.done.done().document_id();
  EXPECT_EQ(client_->Ask(id, kQuestion).tokens,
            fresh_client.Ask(id, kQuestion).tokens);
}

TEST_F(WorkflowTest, PromptTemplatesComeFromTheModelConfig) {
  TempDir dir;
  const std::string custom = dir.path() + "/custom";
  std::filesystem::copy(ModelDir(), custom);
  nlohmann::json config;
  {
    std::ifstream in(custom + "/config.json");
    config = nlohmann::json::parse(in);
  }
  config["twice"]["prompt_templates"]["question_prompt"] = "Q: {question}\nA:";
  std::ofstream(custom + "/config.json") << config.dump();
  server_ = Start("custom", custom);
  client_ = std::make_unique<WorkflowClient>(server_->address());
  const std::string id =
      client_->Ingest(Tokens(50, 6), 0).done.done().document_id();
  const auto answer = client_->Ask(id, kQuestion);
  ASSERT_OK(answer.status);
  EXPECT_EQ(answer.usage.tokens_prefilled(),
            CountTokens(std::string("Q: ") + kQuestion + "\nA:"));

  // A misspelt key stops the server at start-up, naming the key.
  config["twice"]["prompt_templates"]["question_promt"] = "x";
  std::ofstream(custom + "/config.json") << config.dump();
  ServerProcess bad;
  EXPECT_FALSE(
      bad.Start({"--model=" + custom, "--data-dir=" + dir.path() + "/d"},
                dir.path() + "/bad.log"));
  EXPECT_NE(bad.stderr_text().find("question_promt"), std::string::npos)
      << bad.stderr_text();
}

}  // namespace
}  // namespace twice
