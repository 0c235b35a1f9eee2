// End to end over every architecture (`twice init-model --arch=A
// --preset=P`), twice-server as a separate process on 127.0.0.1:0 with a
// real RocksDB store:
//   - ingest stores the document's states (Based and JRT: linear-attention
//     state; Mamba-2: conv + SSM state over SSD chunks of 64; Llama: a
//     growing KV cache; RAT: closed chunks + open chunk, also interleaved
//     with sliding-window attention), one per segment of 24 tokens, a size
//     that is a multiple of no chunk;
//   - ask in the default mode reuses the stored state and reads only the
//     prompt; read-twice reuses it and reads the preamble and the document
//     again after it (state passing over a non-empty state);
//   - after a restart the same questions give the same answers from the
//     stored state, not a recomputation;
//   - Mamba-2, Based and JRT-RNN (prefix reads included) also run with
//     --executor=resident (states in executor slots between reads, synced
//     to the host only for the store);
//   - ListModels names the architecture and offers the prefix modes exactly
//     when the model has a prefix encoder; a model without one answers
//     prefix asks with a precise UNIMPLEMENTED.
#include <algorithm>
#include <chrono>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/services/lighthouse_document.h"
#include "tests/services/workflow_client.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/server_process.h"

namespace twice {
namespace {

using testing::CliBinary;
using testing::kLighthouseDocument;
using testing::kLighthouseQuestion;
using testing::RunCommand;
using testing::ServerProcess;
using testing::TempDir;
using testing::WorkflowAnswer;
using testing::WorkflowClient;

struct Architecture {
  const char* name;      // the test's and the model's name
  const char* arch;      // init-model --arch
  const char* preset;    // init-model --preset
  const char* reported;  // ModelInfo.architecture
  bool prefix_encoder;   // offers the prefix modes
  // An extra twice-server flag, or nullptr.
  const char* server_flag = nullptr;
};

// gtest prints parameters byte by byte unless told.
void PrintTo(const Architecture& architecture, std::ostream* os) {
  *os << architecture.name;
}

constexpr int64_t kSegmentTokens = 24;
constexpr int kMaxTokens = 8;

class ArchitecturePipelineTest : public ::testing::TestWithParam<Architecture> {
 protected:
  void SetUp() override {
    const testing::CommandResult made = RunCommand(
        {CliBinary(), "init-model", std::string("--arch=") + GetParam().arch,
         std::string("--preset=") + GetParam().preset, "--out=" + ModelDir(),
         "--json"});
    ASSERT_EQ(made.exit_code, 0) << made.out;
  }

  std::string ModelDir() const { return dir_.path() + "/model"; }
  int64_t CountTokens(const std::string& text) const {
    return testing::CountTokens(ModelDir(), text);
  }

  void StartServer() {
    server_ = std::make_unique<ServerProcess>();
    std::vector<std::string> flags = {
        std::string("--model=") + GetParam().name + "=" + ModelDir(),
        "--data-dir=" + dir_.path() + "/store"};
    if (GetParam().server_flag != nullptr) {
      flags.push_back(GetParam().server_flag);
      flags.push_back("--metrics_listen=127.0.0.1:0");
    }
    ASSERT_TRUE(server_->Start(flags, dir_.path() + "/server.log"))
        << server_->stderr_text();
    client_ = std::make_unique<WorkflowClient>(server_->address());
  }
  int StopServer() {
    client_.reset();  // an open channel would hold the shutdown to its grace
    return server_->Stop();
  }

  WorkflowAnswer Ask(const std::string& doc, v1::AskMode mode) {
    return client_->Ask(doc, kLighthouseQuestion, mode, kMaxTokens);
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<WorkflowClient> client_;
};

TEST_P(ArchitecturePipelineTest, ListsTheArchitectureAndItsModes) {
  StartServer();
  grpc::ClientContext context;
  v1::ListModelsResponse models;
  ASSERT_OK(client_->orchestrator().ListModels(&context, {}, &models));
  ASSERT_EQ(models.models_size(), 1);
  const v1::ModelInfo& model = models.models(0);
  EXPECT_EQ(model.name(), GetParam().name);
  EXPECT_EQ(model.architecture(), GetParam().reported);
  EXPECT_GT(model.state_bytes(), 0);
  // The server says how it runs the model.
  const bool resident =
      GetParam().server_flag != nullptr &&
      std::string(GetParam().server_flag) == "--executor=resident";
  EXPECT_NE(server_->stderr_text().find(resident ? "executor=resident"
                                                 : "executor=offload"),
            std::string::npos)
      << server_->stderr_text();
  const auto& modes = model.modes();
  for (v1::AskMode mode : {v1::ASK_MODE_DEFAULT, v1::ASK_MODE_READ_TWICE,
                           v1::ASK_MODE_READ_TWICE_FULL}) {
    EXPECT_EQ(std::count(modes.begin(), modes.end(), mode), 1)
        << v1::AskMode_Name(mode);
  }
  for (v1::AskMode mode :
       {v1::ASK_MODE_PREFIX, v1::ASK_MODE_PREFIX_WITH_QUESTION}) {
    EXPECT_EQ(std::count(modes.begin(), modes.end(), mode),
              GetParam().prefix_encoder ? 1 : 0)
        << v1::AskMode_Name(mode);
  }
  EXPECT_EQ(StopServer(), 0);
}

TEST_P(ArchitecturePipelineTest, IngestAskRestartAskReusesTheState) {
  const int64_t doc_tokens = CountTokens(kLighthouseDocument);
  ASSERT_GT(doc_tokens, 64);
  const int64_t prompt =
      CountTokens(testing::QuestionPrompt(kLighthouseQuestion));
  const int64_t preamble =
      CountTokens(testing::ReadTwicePreamble(kLighthouseQuestion));
  StartServer();
  const testing::IngestResult ingested =
      client_->Ingest({}, kSegmentTokens, "", "", kLighthouseDocument);
  ASSERT_OK(ingested.status);
  const v1::DocumentInfo& doc = ingested.done.done();
  EXPECT_EQ(doc.tokens(), doc_tokens);
  ASSERT_EQ(doc.segments_size(),
            (doc_tokens + kSegmentTokens - 1) / kSegmentTokens);
  EXPECT_EQ(doc.segments(doc.segments_size() - 1).end_token(), doc_tokens);

  const WorkflowAnswer first = Ask(doc.document_id(), v1::ASK_MODE_DEFAULT);
  ASSERT_OK(first.status);
  EXPECT_EQ(first.tokens.size(), static_cast<size_t>(kMaxTokens));
  EXPECT_EQ(first.finish_reason, "length");
  EXPECT_EQ(first.usage.states_reused(), 1);
  EXPECT_EQ(first.usage.states_recomputed(), 0);
  EXPECT_EQ(first.usage.tokens_reused(), doc_tokens);
  EXPECT_EQ(first.usage.tokens_prefilled(), prompt);
  EXPECT_EQ(first.usage.tokens_decoded(), kMaxTokens);
  EXPECT_GT(first.usage.ttft_ms(), 0);
  const WorkflowAnswer second = Ask(doc.document_id(), v1::ASK_MODE_DEFAULT);
  ASSERT_OK(second.status);
  EXPECT_EQ(second.tokens, first.tokens);
  if (GetParam().server_flag != nullptr) {
    // The resident executor brought states and ids back, and every
    // request's slot is free again once its answer is done.
    const int port = testing::MetricsPort(server_->stderr_text());
    ASSERT_GT(port, 0) << server_->stderr_text();
    std::string page = testing::HttpGet(port, "/metrics");
    EXPECT_GT(testing::Sample(page, "twice_resident_bytes_to_host"), 0) << page;
    for (int i = 0;
         i < 50 && testing::Sample(page, "twice_resident_sequences") != 0;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
      page = testing::HttpGet(port, "/metrics");
    }
    EXPECT_EQ(testing::Sample(page, "twice_resident_sequences"), 0) << page;
    // Exported, and 0 on the CPU device: it records no graphs, and its
    // copies to the host do not wait.
    EXPECT_EQ(testing::Sample(page, "twice_resident_step_graph_launches"), 0)
        << page;
    EXPECT_EQ(testing::Sample(page, "twice_resident_host_wait_seconds"), 0)
        << page;
    // Exported (a count of reads that shared prefill passes).
    EXPECT_GE(testing::Sample(page, "twice_resident_batched_prefills"), 0)
        << page;
    // Every sequence released: the KV cache is whole again (65536 tokens
    // with full attention: Llama, Nemotron-H, Granite-4.0-H; none without;
    // RAT's chunk table: 65536 tokens' chunks, whole blocks).
    const std::string arch = GetParam().arch;
    const double kv_free =
        testing::Sample(page, "twice_resident_kv_free_tokens");
    if (arch == "rat") {
      EXPECT_GE(kv_free, 65536) << page;
    } else {
      const bool full_attention =
          arch == "llama" || arch == "nemotron_h" || arch == "granitemoehybrid";
      EXPECT_EQ(kv_free, full_attention ? 65536 : 0) << page;
    }
  }

  // Read-twice: the first read comes from the store, the second is read
  // after it in the answering call.
  const WorkflowAnswer twice = Ask(doc.document_id(), v1::ASK_MODE_READ_TWICE);
  ASSERT_OK(twice.status);
  EXPECT_EQ(twice.tokens.size(), static_cast<size_t>(kMaxTokens));
  EXPECT_EQ(twice.usage.states_reused(), 1);
  EXPECT_EQ(twice.usage.tokens_prefilled(), preamble + doc_tokens + prompt);

  ASSERT_EQ(StopServer(), 0);
  StartServer();
  const WorkflowAnswer after_restart =
      Ask(doc.document_id(), v1::ASK_MODE_DEFAULT);
  ASSERT_TRUE(after_restart.status.ok())
      << after_restart.status.error_message();
  EXPECT_EQ(after_restart.tokens, first.tokens);
  EXPECT_EQ(after_restart.text, first.text);
  EXPECT_EQ(after_restart.usage.states_reused(), 1);
  EXPECT_EQ(after_restart.usage.states_recomputed(), 0);
  EXPECT_EQ(after_restart.usage.tokens_reused(), doc_tokens);
  EXPECT_EQ(after_restart.usage.tokens_prefilled(), prompt);
  const WorkflowAnswer twice_again =
      Ask(doc.document_id(), v1::ASK_MODE_READ_TWICE);
  ASSERT_OK(twice_again.status);
  EXPECT_EQ(twice_again.tokens, twice.tokens);
  EXPECT_EQ(StopServer(), 0);
}

TEST_P(ArchitecturePipelineTest, PrefixModesNeedAPrefixEncoder) {
  if (GetParam().prefix_encoder) {
    GTEST_SKIP() << "prefix modes are served (jrt_pipeline_test.cc)";
  }
  StartServer();
  const testing::IngestResult ingested =
      client_->Ingest({}, kSegmentTokens, "", "", kLighthouseDocument);
  ASSERT_OK(ingested.status);
  for (v1::AskMode mode :
       {v1::ASK_MODE_PREFIX, v1::ASK_MODE_PREFIX_WITH_QUESTION}) {
    const WorkflowAnswer answer = Ask(ingested.done.done().document_id(), mode);
    EXPECT_EQ(answer.status.error_code(), grpc::StatusCode::UNIMPLEMENTED)
        << answer.status.error_message();
    EXPECT_NE(answer.status.error_message().find("no prefix encoder"),
              std::string::npos)
        << answer.status.error_message();
  }
  EXPECT_EQ(StopServer(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    , ArchitecturePipelineTest,
    ::testing::Values(
        Architecture{"based", "based", "tiny", "based", false},
        Architecture{"jrt", "jrt", "tiny", "jrt", true},
        Architecture{"mamba2", "mamba2", "tiny", "mamba2", false},
        // The resident executor's slots, residency and
        // device sampling on the cpu device.
        Architecture{"mamba2resident", "mamba2", "tiny", "mamba2", false,
                     "--executor=resident"},
        Architecture{"basedresident", "based", "tiny", "based", false,
                     "--executor=resident"},
        Architecture{"jrtresident", "jrt", "tiny", "jrt", true,
                     "--executor=resident"},
        Architecture{"llama", "llama", "tiny", "llama", false},
        Architecture{"llamaresident", "llama", "tiny", "llama", false,
                     "--executor=resident"},
        Architecture{"rat", "rat", "tiny", "rat", false},
        Architecture{"ratresident", "rat", "tiny", "rat", false,
                     "--executor=resident"},
        Architecture{"ratswa", "rat", "tiny-swa", "rat", false},
        Architecture{"ratswaresident", "rat", "tiny-swa", "rat", false,
                     "--executor=resident"},
        Architecture{"nemotronh", "nemotron_h", "tiny", "nemotron_h", false},
        Architecture{"nemotronhresident", "nemotron_h", "tiny", "nemotron_h",
                     false, "--executor=resident"},
        Architecture{"granite", "granitemoehybrid", "tiny", "granitemoehybrid",
                     false},
        Architecture{"granitemoeresident", "granitemoehybrid", "tiny-moe",
                     "granitemoehybrid", false, "--executor=resident"}),
    [](const ::testing::TestParamInfo<Architecture>& info) {
      return std::string(info.param.name);
    });

}  // namespace
}  // namespace twice
