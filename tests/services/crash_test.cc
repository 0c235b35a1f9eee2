// kill -9 of a real twice-server (role all, real RocksDB) in the middle of
// concurrent ingests, many times at random points. After each restart:
// every acknowledged document answers as it did before the crash without
// recomputing, no record names a missing state, and each unacknowledged
// ingest either completed whole or left nothing visible. Bounded to about a
// minute.
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/services/serving_client.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"

namespace twice {
namespace {

using testing::CliBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::ServingClient;
using testing::TempDir;

constexpr int64_t kCrashSegmentTokens = 32;
constexpr int kWriters = 3;
constexpr int kMaxRounds = 8;
// Crash rounds stop starting after this; the final check comes after.
constexpr auto kCrashPhase = std::chrono::seconds(35);

struct Doc {
  std::string id;
  std::string text;
  int64_t tokens = 0;
  bool acked = false;
  std::optional<std::vector<int32_t>> answer;  // asked before a crash
};

std::string DocumentText(int index) {
  static const char* const kWords[] = {
      "harbour", "lamp",   "river", "keeper",  "stone",    "winter",
      "bakery",  "market", "tower", "green",   "festival", "library",
      "steps",   "north",  "cold",  "evening", "customs",  "breakwater"};
  std::mt19937 rng(1000 + index);
  std::string text = "Document " + std::to_string(index) + ".";
  const int words = 40 + static_cast<int>(rng() % 120);
  for (int i = 0; i < words; ++i) {
    text += " ";
    text += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
  }
  return text + ".";
}

class CrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const testing::CommandResult made =
        RunCommand({CliBinary(), "init-model", "--arch=based", "--preset=tiny",
                    "--out=" + dir_.path() + "/model", "--json"});
    ASSERT_EQ(made.exit_code, 0) << made.out;
    absl::StatusOr<std::unique_ptr<engine::Tokenizer>> tokenizer =
        engine::Tokenizer::FromFile(dir_.path() + "/model/tokenizer.json");
    ASSERT_OK(tokenizer);
    tokenizer_ = *std::move(tokenizer);
  }

  void StartServer() {
    server_ = std::make_unique<ServerProcess>();
    ASSERT_TRUE(server_->Start({"--model=" + dir_.path() + "/model",
                                "--data-dir=" + dir_.path() + "/store",
                                "--internal-listen=127.0.0.1:0"},
                               dir_.path() + "/server.log"))
        << server_->stderr_text();
  }

  int64_t CountTokens(const std::string& text) {
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer_->Encode(text);
    EXPECT_OK(ids);
    return ids.ok() ? static_cast<int64_t>(ids->size()) : -1;
  }

  // The invariants, checked against a freshly restarted server.
  void VerifyAfterRestart(const std::vector<Doc>& docs) {
    ServingClient client(server_->address(), server_->internal_address());
    std::map<std::string, const Doc*> by_id;
    for (const Doc& doc : docs) by_id[doc.id] = &doc;
    for (const Doc& doc : docs) {
      SCOPED_TRACE(doc.id);
      v1::DocumentInfo info;
      const grpc::Status found = client.GetDocument(doc.id, &info);
      if (!doc.acked && found.error_code() == grpc::StatusCode::NOT_FOUND) {
        continue;  // an unacknowledged ingest that left nothing: fine
      }
      ASSERT_OK(found);
      // Whole: every token, boundaries to the end, every state stored.
      EXPECT_EQ(info.tokens(), doc.tokens);
      ASSERT_GT(info.segments_size(), 0);
      EXPECT_EQ(info.segments(info.segments_size() - 1).end_token(),
                doc.tokens);
      EXPECT_TRUE(client.AllStatesStored(info));
      const testing::AskResult asked = client.Ask(doc.id);
      ASSERT_OK(asked.status);
      EXPECT_EQ(asked.usage.states_recomputed(), 0);
      if (doc.answer.has_value()) {
        EXPECT_EQ(asked.tokens, *doc.answer);
      }
    }
    // No record the server lists names a missing state, and every one of
    // them is a document this test wrote.
    for (const v1::DocumentInfo& info : client.ListDocuments()) {
      EXPECT_TRUE(by_id.contains(info.document_id())) << info.document_id();
      EXPECT_TRUE(client.AllStatesStored(info)) << info.document_id();
    }
  }

  TempDir dir_;
  std::unique_ptr<engine::Tokenizer> tokenizer_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(CrashTest, AcknowledgedIngestsSurviveKillNineAtRandomPoints) {
  std::mt19937 rng(20240611);
  std::vector<Doc> docs;
  std::mutex mu;
  int next_index = 0;
  int crashes = 0;
  int acked = 0;
  const auto started = std::chrono::steady_clock::now();

  for (int round = 0; round < kMaxRounds &&
                      std::chrono::steady_clock::now() - started < kCrashPhase;
       ++round) {
    StartServer();
    if (round > 0) {
      std::vector<Doc> snapshot;
      {
        std::lock_guard<std::mutex> lock(mu);
        snapshot = docs;
      }
      VerifyAfterRestart(snapshot);
      if (HasFatalFailure()) return;
    }
    std::atomic<bool> stop{false};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&] {
        ServingClient client(server_->address(), server_->internal_address());
        while (!stop.load()) {
          size_t slot;
          std::string id, text;
          {
            std::lock_guard<std::mutex> lock(mu);
            const int index = next_index++;
            id = "doc-" + std::to_string(index);
            text = DocumentText(index);
            docs.push_back({id, text, CountTokens(text), false, std::nullopt});
            slot = docs.size() - 1;
          }
          if (!client.Ingest(id, text, kCrashSegmentTokens, false).ok()) return;
          {
            std::lock_guard<std::mutex> lock(mu);
            docs[slot].acked = true;
          }
          const testing::AskResult asked = client.Ask(id);
          if (!asked.status.ok()) return;
          std::lock_guard<std::mutex> lock(mu);
          docs[slot].answer = asked.tokens;
        }
      });
    }
    // A random point in the middle of the ingests.
    std::this_thread::sleep_for(
        std::chrono::milliseconds(150 + static_cast<int>(rng() % 500)));
    server_->Kill();
    ++crashes;
    stop = true;
    for (std::thread& writer : writers) writer.join();
  }
  for (const Doc& doc : docs) acked += doc.acked ? 1 : 0;

  StartServer();
  VerifyAfterRestart(docs);
  ServingClient client(server_->address(), server_->internal_address());
  const v1::VerifyStoreResponse verified = client.Verify(/*repair=*/false);
  EXPECT_EQ(verified.bad_size(), 0);
  EXPECT_GT(verified.states_checked(), 0);
  EXPECT_EQ(server_->Stop(), 0);

  EXPECT_GE(crashes, 4);
  EXPECT_GE(acked, crashes);  // ingests were acknowledged between crashes
  RecordProperty("crashes", crashes);
  RecordProperty("documents_acknowledged", acked);
  RecordProperty("documents_attempted", static_cast<int>(docs.size()));
}

}  // namespace
}  // namespace twice
