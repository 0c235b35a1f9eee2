// The store under faults, through a real twice-server process: state values
// damaged on disk, a byte budget smaller than the working set, and the
// operator's view (Prometheus endpoint, `twice store ...`).

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "storage/rocksdb_state_store.h"
#include "tests/services/serving_client.h"
#include "tests/storage/raw_db.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/server_process.h"

namespace twice {
namespace {

using testing::CliBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::ServingClient;
using testing::TempDir;

constexpr int64_t kSegmentTokens = 32;

std::string Text(int index, int words) {
  static const char* const kWords[] = {
      "quiet",   "orchard", "copper",  "signal", "meadow",  "ferry",
      "lantern", "basalt",  "harvest", "tide",   "granite", "willow"};
  std::string text = "Record " + std::to_string(index) + ":";
  for (int i = 0; i < words; ++i) {
    text += " ";
    text += kWords[(i * 7 + index * 5 + i / 3) % 12];
  }
  return text + ".";
}

using testing::HttpGet;
using testing::Sample;

class StoreFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const testing::CommandResult made =
        RunCommand({CliBinary(), "init-model", "--arch=based", "--preset=tiny",
                    "--out=" + dir_.path() + "/model", "--json"});
    ASSERT_EQ(made.exit_code, 0) << made.out;
  }
  std::string StoreDir() const { return dir_.path() + "/store"; }

  void StartServer(std::vector<std::string> extra = {}) {
    server_ = std::make_unique<ServerProcess>();
    extra.push_back("--model=" + dir_.path() + "/model");
    extra.push_back("--data-dir=" + StoreDir());
    extra.push_back("--internal-listen=127.0.0.1:0");
    ASSERT_TRUE(server_->Start(extra, dir_.path() + "/server.log"))
        << server_->stderr_text();
    client_ = std::make_unique<ServingClient>(server_->address(),
                                              server_->internal_address());
  }
  void StopServer() {
    client_.reset();
    ASSERT_EQ(server_->Stop(), 0);
  }
  v1::DocumentInfo Ingest(const std::string& id, const std::string& text,
                          bool pin = false) {
    v1::DocumentInfo info;
    const grpc::Status status =
        client_->Ingest(id, text, kSegmentTokens, pin, &info);
    EXPECT_OK(status);
    return info;
  }
  testing::AskResult Ask(const std::string& id) {
    testing::AskResult result = client_->Ask(id);
    EXPECT_OK(result.status);
    return result;
  }
  testing::CommandResult Store(const std::string& what,
                               std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        CliBinary(), "store", what, "--server=" + server_->address(), "--json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv);
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<ServingClient> client_;
};

TEST_F(StoreFaultTest, DamagedStateValuesAreRecomputedWithTheSameAnswer) {
  StartServer();
  const v1::DocumentInfo flipped = Ingest("flipped", Text(1, 90));
  const v1::DocumentInfo truncated = Ingest("truncated", Text(2, 90));
  ASSERT_GE(flipped.segments_size(), 3);
  const std::vector<int32_t> flipped_answer = Ask("flipped").tokens;
  const std::vector<int32_t> truncated_answer = Ask("truncated").tokens;
  StopServer();
  {
    // Damage the final states through RocksDB itself: one flipped byte in
    // the middle of the value, one value cut in half.
    storage::test_util::RawDb raw(StoreDir());
    const std::string a =
        flipped.segments(flipped.segments_size() - 1).state_key().digest();
    const std::string b =
        truncated.segments(truncated.segments_size() - 1).state_key().digest();
    std::string value;
    ASSERT_OK(raw.Get(storage::kStatesFamily, a, &value));
    value[value.size() / 2] ^= 0x40;
    ASSERT_OK(raw.Put(storage::kStatesFamily, a, value));
    ASSERT_OK(raw.Get(storage::kStatesFamily, b, &value));
    value.resize(value.size() / 2);
    ASSERT_OK(raw.Put(storage::kStatesFamily, b, value));
  }
  StartServer();
  for (const auto& [id, answer] : std::map<std::string, std::vector<int32_t>>{
           {"flipped", flipped_answer}, {"truncated", truncated_answer}}) {
    SCOPED_TRACE(id);
    const testing::AskResult recovered = Ask(id);
    EXPECT_EQ(recovered.tokens, answer);
    EXPECT_GE(recovered.usage.states_recomputed(), 1);
    const testing::AskResult again = Ask(id);
    EXPECT_EQ(again.tokens, answer);
    EXPECT_EQ(again.usage.states_recomputed(), 0);
  }
  const v1::StoreStats stats = client_->Stats();
  EXPECT_EQ(stats.corruptions(), 2);
  EXPECT_GE(stats.recomputes(), 2);
  EXPECT_EQ(client_->Verify(false).bad_size(), 0);
  StopServer();
}

TEST_F(StoreFaultTest, BudgetSmallerThanWorkingSetKeepsAnswersAndPins) {
  // Reference answers from an unbounded store, and the size of one state.
  const std::string pinned_text = Text(0, 100);
  std::vector<std::string> texts;
  for (int i = 1; i <= 6; ++i) texts.push_back(Text(i, 90 + 10 * i));
  StartServer();
  std::map<std::string, std::vector<int32_t>> reference;
  Ingest("pinned", pinned_text);
  reference["pinned"] = Ask("pinned").tokens;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string id = "doc-" + std::to_string(i);
    Ingest(id, texts[i]);
    reference[id] = Ask(id).tokens;
  }
  const v1::StoreStats unbounded = client_->Stats();
  StopServer();
  std::filesystem::remove_all(StoreDir());
  const int64_t per_state = unbounded.state_bytes() / unbounded.state_count();
  // The pinned document's states and about one more document's: a
  // fraction of the working set.
  const int64_t budget = per_state * 9;
  ASSERT_LT(budget, unbounded.state_bytes() / 2);

  // The decode service's state cache off: an evicted state must be read
  // (and missed) from the store, not served from memory.
  StartServer({"--state_budget_bytes=" + std::to_string(budget),
               "--state_cache_bytes=0"});
  const v1::DocumentInfo pinned = Ingest("pinned", pinned_text, /*pin=*/true);
  ASSERT_LE(pinned.segments_size(), 6);
  EXPECT_EQ(Ask("pinned").tokens, reference["pinned"]);
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string id = "doc-" + std::to_string(i);
    Ingest(id, texts[i]);
    EXPECT_LE(client_->Stats().state_bytes(), budget);
    EXPECT_EQ(Ask(id).tokens, reference[id]);
  }
  int64_t recomputed = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [id, answer] : reference) {
      SCOPED_TRACE(id);
      const testing::AskResult asked = Ask(id);
      EXPECT_EQ(asked.tokens, answer);
      if (id == "pinned") {
        EXPECT_EQ(asked.usage.states_recomputed(), 0);
        EXPECT_TRUE(client_->AllStatesStored(pinned));
      }
      recomputed += asked.usage.states_recomputed();
      EXPECT_LE(client_->Stats().state_bytes(), budget);
    }
  }
  const v1::StoreStats stats = client_->Stats();
  EXPECT_GT(stats.evictions(), 0);
  EXPECT_GT(recomputed, 0);
  EXPECT_EQ(stats.budget_bytes(), budget);
  EXPECT_EQ(stats.pinned_state_count(), pinned.segments_size());
  StopServer();
}

TEST_F(StoreFaultTest, MetricsEndpointServesStoreAndRequestCounters) {
  StartServer({"--metrics_listen=127.0.0.1:0"});
  std::smatch match;
  const std::string log = server_->stderr_text();
  ASSERT_TRUE(std::regex_search(
      log, match, std::regex("event=metrics.started .*port=([0-9]+)")))
      << log;
  const int port = std::stoi(match[1]);
  Ingest("doc", Text(3, 60));
  const testing::AskResult asked = Ask("doc");
  const std::string metrics = HttpGet(port, "/metrics");
  ASSERT_FALSE(metrics.empty());
  // The one answer's prompt, read by the decode service.
  EXPECT_GT(asked.usage.tokens_prefilled(), 0);
  EXPECT_EQ(Sample(metrics, "twice_decode_read_tokens_total"),
            asked.usage.tokens_prefilled());
  EXPECT_GT(Sample(metrics, "twice_store_state_bytes"), 0);
  EXPECT_GT(Sample(metrics, "twice_store_states"), 0);
  EXPECT_EQ(Sample(metrics, "twice_store_documents"), 1);
  EXPECT_GE(Sample(metrics, "twice_store_hits_total"), 1);
  EXPECT_EQ(Sample(metrics, "twice_store_corruptions_total"), 0);
  EXPECT_EQ(Sample(metrics, "twice_store_evictions_total"), 0);
  EXPECT_NE(metrics.find("# TYPE twice_store_hits_total counter"),
            std::string::npos);
  EXPECT_NE(metrics.find("twice_grpc_requests_total{"), std::string::npos);
  EXPECT_NE(metrics.find("method=\"/twice.v1.Orchestrator/Ask\""),
            std::string::npos)
      << metrics;
  StopServer();
}

TEST_F(StoreFaultTest, StoreCommandsVerifyCompactAndCollect) {
  StartServer();
  const v1::DocumentInfo doc = Ingest("doc", Text(4, 90));
  testing::CommandResult stats = Store("stats");
  ASSERT_EQ(stats.exit_code, 0) << stats.out;
  const nlohmann::json stats_json = nlohmann::json::parse(stats.out);
  EXPECT_EQ(stats_json["state_count"].get<int64_t>(), doc.segments_size());
  EXPECT_EQ(stats_json["document_count"].get<int64_t>(), 1);
  testing::CommandResult verify = Store("verify");
  ASSERT_EQ(verify.exit_code, 0) << verify.out;
  EXPECT_TRUE(nlohmann::json::parse(verify.out)["bad"].empty());
  StopServer();
  {
    storage::test_util::RawDb raw(StoreDir());
    const std::string key = doc.segments(0).state_key().digest();
    std::string value;
    ASSERT_OK(raw.Get(storage::kStatesFamily, key, &value));
    value[value.size() - 3] ^= 0x01;
    ASSERT_OK(raw.Put(storage::kStatesFamily, key, value));
  }
  StartServer();
  verify = Store("verify");
  EXPECT_EQ(verify.exit_code, 1) << verify.out;
  nlohmann::json report = nlohmann::json::parse(verify.out);
  ASSERT_EQ(report["bad"].size(), 1u) << verify.out;
  EXPECT_EQ(report["bad"][0]["family"], "states");
  EXPECT_EQ(report["repaired"].get<int64_t>(), 0);
  verify = Store("verify", {"--repair"});
  EXPECT_EQ(nlohmann::json::parse(verify.out)["repaired"].get<int64_t>(), 1);
  verify = Store("verify");
  EXPECT_EQ(verify.exit_code, 0) << verify.out;
  // The repaired state is recomputed by the next ask that needs it.
  EXPECT_FALSE(client_->AllStatesStored(doc));

  testing::CommandResult compact = Store("compact");
  ASSERT_EQ(compact.exit_code, 0) << compact.out;
  EXPECT_GT(
      nlohmann::json::parse(compact.out)["disk_bytes_after"].get<int64_t>(), 0);
  testing::CommandResult gc = Store("gc");
  ASSERT_EQ(gc.exit_code, 0) << gc.out;
  EXPECT_TRUE(nlohmann::json::parse(gc.out).contains("orphan_blocks"));
  EXPECT_EQ(Store("nonsense").exit_code, 1);
  StopServer();
}

}  // namespace
}  // namespace twice
