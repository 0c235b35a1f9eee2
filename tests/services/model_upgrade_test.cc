// A model upgrade through a real twice-server: the same model name served
// from new weights (another fingerprint) over a store holding documents read
// by the old ones. Questions must not resume from the old states; the
// document is read again from its stored tokens, once, and then answers
// exactly as a fresh ingest into the new version does.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/models/init_model.h"
#include "gtest/gtest.h"
#include "tests/services/workflow_client.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"

namespace twice {
namespace {

using testing::ServerProcess;
using testing::TempDir;
using testing::WorkflowClient;

constexpr char kTokenizer[] = "models/tokenizers/gpt2/tokenizer.json";
constexpr char kUpgradeQuestion[] = "What comes next?";

std::vector<int32_t> Tokens(int n) {
  std::vector<int32_t> out(n);
  for (int i = 0; i < n; ++i) out[i] = (i * 7919 + 13) % 50000;
  return out;
}

void WriteModel(const std::string& dir, uint64_t seed) {
  engine::InitModelOptions init;
  init.architecture = "based";
  init.preset = "tiny";
  init.out_dir = dir;
  init.tokenizer_json = kTokenizer;
  init.seed = seed;
  const absl::Status written = engine::WriteRandomModel(init);
  ASSERT_OK(written);
}

class ModelUpgradeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteModel(dir_.path() + "/v1", 1);
    WriteModel(dir_.path() + "/v2", 2);
  }

  // Serves `version` as model "m" over the shared store.
  void Start(ServerProcess& server, const std::string& version) {
    ASSERT_TRUE(server.Start({"--model=m=" + dir_.path() + "/" + version,
                              "--data-dir=" + dir_.path() + "/data"},
                             dir_.path() + "/server.log"))
        << server.stderr_text();
  }

  TempDir dir_;
};

TEST_F(ModelUpgradeTest, DocumentsAreReadAgainFromTheirTokensOnce) {
  const std::vector<int32_t> tokens = Tokens(300);
  std::vector<int32_t> old_answer;
  {
    ServerProcess server;
    Start(server, "v1");
    WorkflowClient client(server.address());
    ASSERT_OK(client.Ingest(tokens, 128, "doc").status);
    const testing::WorkflowAnswer answer = client.Ask("doc", kUpgradeQuestion);
    ASSERT_OK(answer.status);
    old_answer = answer.tokens;
  }
  ServerProcess server;
  Start(server, "v2");
  WorkflowClient client(server.address());
  // The first question after the upgrade reads the document again...
  const testing::WorkflowAnswer upgraded = client.Ask("doc", kUpgradeQuestion);
  ASSERT_OK(upgraded.status);
  EXPECT_NE(server.stderr_text().find("event=document.upgraded"),
            std::string::npos);
  // ...into exactly the states a fresh ingest into v2 has: the same chain
  // keys, so that ingest finds every segment stored already.
  const testing::IngestResult fresh = client.Ingest(tokens, 128, "fresh");
  ASSERT_OK(fresh.status);
  EXPECT_EQ(fresh.done.segments_reused(), 3);
  const testing::WorkflowAnswer reference =
      client.Ask("fresh", kUpgradeQuestion);
  ASSERT_OK(reference.status);
  EXPECT_EQ(upgraded.tokens, reference.tokens);
  // Random weights of another seed answer differently; had the old states
  // been resumed, the answer would have been the old one.
  EXPECT_NE(upgraded.tokens, old_answer);
  // Later questions reuse the new states: only the question is prefilled.
  const testing::WorkflowAnswer again = client.Ask("doc", kUpgradeQuestion);
  ASSERT_OK(again.status);
  EXPECT_EQ(again.tokens, upgraded.tokens);
  EXPECT_GE(again.usage.states_reused(), 1);
  EXPECT_LT(again.usage.tokens_prefilled(), 100);
  // Appends continue from the upgraded document.
  EXPECT_OK(client.Append("doc", Tokens(40), 128).status);
  EXPECT_OK(client.Ask("doc", kUpgradeQuestion).status);
}

}  // namespace
}  // namespace twice
