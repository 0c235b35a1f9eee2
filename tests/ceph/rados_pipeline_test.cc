// The whole pipeline on the RADOS store (--store=rados), in real processes
// against ctest's local Ceph cluster, each test with its own pools:
//   - orchestrator, prefill and decode roles that share only the cluster:
//     ingest, ask in every causal mode, append, restart every process, and
//     the same answers as an embedded --role=all, with the stored states
//     reused;
//   - kill -9 of one OSD during concurrent ingests: every acknowledged
//     document is readable with its exact tokens, its answer unchanged,
//     and ingests go on while the OSD is down;
//   - two OSDs of three down: calls fail UNAVAILABLE within the operation
//     deadline instead of hanging, and once the OSDs are back every
//     acknowledged document answers as before;
//   - the monitor restarted under a stream of ingests: every one succeeds;
//   - a damaged state object (overwritten as `rados put` would) is found,
//     deleted and recomputed, and the answer does not change;
//   - an orchestrator answers a document it asked before from its kept
//     record with no record read while the cluster's watch shows it
//     unchanged, and never once another orchestrator appended to it or
//     deleted it.
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "storage/rados/rados_state_store.h"
#include "storage/rados/rados_store.h"
#include "tests/ceph/ceph_test_util.h"
#include "tests/services/workflow_client.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/server_process.h"
#include "tests/testing/status_matchers.h"

namespace twice {
namespace {

using storage::test_util::ClusterCommand;
using storage::test_util::ClusterConf;
using testing::CliBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::TempDir;
using testing::WorkflowClient;

std::vector<int32_t> Tokens(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> out(n);
  for (int32_t& token : out) token = static_cast<int32_t>(rng() % 50000);
  return out;
}

class RadosPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(ClusterConf().empty())
        << "TWICE_CEPH_CONF is not set: run through ctest (fixture "
           "ceph_cluster)";
    prefix_ = "twice-test-pipeline-" + std::to_string(std::random_device{}());
    model_ = "--model=" + dir_.path() + "/model";
    ASSERT_EQ(RunCommand({CliBinary(), "init-model",
                          "--out=" + dir_.path() + "/model"})
                  .exit_code,
              0);
    ASSERT_TRUE(reference_.Start({model_, "--data-dir=" + dir_.path() + "/all"},
                                 dir_.path() + "/all.log"))
        << reference_.stderr_text();
  }

  // The flags that put a process on this test's pools.
  std::vector<std::string> Rados(std::vector<std::string> flags) const {
    flags.push_back(model_);
    flags.push_back("--store=rados");
    flags.push_back("--rados-conf=" + ClusterConf());
    flags.push_back("--rados-pool-prefix=" + prefix_);
    // Long enough to ride out an OSD being marked down (about 6 s here).
    flags.push_back("--rados-op-timeout-seconds=30");
    return flags;
  }

  // A prefill and a decode role on this test's pools.
  void StartInternalRoles(ServerProcess& prefill, ServerProcess& decode) {
    ASSERT_TRUE(
        prefill.Start(Rados({"--role=prefill"}), dir_.path() + "/prefill.log"))
        << prefill.stderr_text();
    ASSERT_TRUE(
        decode.Start(Rados({"--role=decode"}), dir_.path() + "/decode.log"))
        << decode.stderr_text();
  }

  // The RADOS store itself, for reading what the processes stored.
  std::unique_ptr<storage::Store> OpenStore() {
    storage::RadosStoreOptions options;
    options.cluster.conf_file = ClusterConf();
    options.pool_prefix = prefix_;
    absl::StatusOr<std::unique_ptr<storage::Store>> store =
        storage::OpenRadosStore(options);
    EXPECT_OK(store);
    return store.ok() ? *std::move(store) : nullptr;
  }

  TempDir dir_;
  std::string prefix_;
  std::string model_;
  ServerProcess reference_;
};

TEST_F(RadosPipelineTest, RolesShareOnlyTheClusterAndSurviveRestarts) {
  ServerProcess prefill, decode, orchestrator;
  auto start = [&] {
    ASSERT_NO_FATAL_FAILURE(StartInternalRoles(prefill, decode));
    ASSERT_TRUE(orchestrator.Start(
        Rados({"--role=orchestrator", "--prefill-address=" + prefill.address(),
               "--decode-address=" + decode.address()}),
        dir_.path() + "/orchestrator.log"))
        << orchestrator.stderr_text();
  };
  ASSERT_NO_FATAL_FAILURE(start());
  auto split = std::make_unique<WorkflowClient>(orchestrator.address());
  auto single = std::make_unique<WorkflowClient>(reference_.address());

  const std::vector<int32_t> doc = Tokens(1500, 1);
  const auto ingested = split->Ingest(doc, 128);
  ASSERT_OK(ingested.status);
  const auto reference = single->Ingest(doc, 128);
  ASSERT_OK(reference.status);
  const std::string id = ingested.done.done().document_id();
  ASSERT_EQ(id, reference.done.done().document_id());
  ASSERT_OK(split->Append(id, Tokens(100, 2), 64).status);
  ASSERT_OK(single->Append(id, Tokens(100, 2), 64).status);

  const std::vector<v1::AskMode> modes = {v1::ASK_MODE_DEFAULT,
                                          v1::ASK_MODE_READ_TWICE,
                                          v1::ASK_MODE_READ_TWICE_FULL};
  std::vector<std::vector<int32_t>> answers;
  for (v1::AskMode mode : modes) {
    const auto want = single->Ask(id, "What comes next?", mode, 6);
    const auto got = split->Ask(id, "What comes next?", mode, 6);
    ASSERT_OK(want.status);
    ASSERT_OK(got.status);
    EXPECT_EQ(got.tokens, want.tokens) << "mode " << mode;
    EXPECT_EQ(got.usage.tokens_prefilled(), want.usage.tokens_prefilled());
    answers.push_back(got.tokens);
  }

  // Every process restarted: nothing of the document lived in them.
  split.reset();
  EXPECT_EQ(orchestrator.Stop(), 0);
  EXPECT_EQ(decode.Stop(), 0);
  EXPECT_EQ(prefill.Stop(), 0);
  ASSERT_NO_FATAL_FAILURE(start());
  split = std::make_unique<WorkflowClient>(orchestrator.address());
  for (size_t i = 0; i < modes.size(); ++i) {
    const auto again = split->Ask(id, "What comes next?", modes[i], 6);
    ASSERT_OK(again.status);
    EXPECT_EQ(again.tokens, answers[i]) << "mode " << modes[i];
    // Read twice in full reads the whole document again by design.
    if (modes[i] != v1::ASK_MODE_READ_TWICE_FULL) {
      EXPECT_GE(again.usage.states_reused(), 1) << "mode " << modes[i];
    }
  }
  // A second ingest of a document is all reuse, from the cluster.
  const std::vector<int32_t> other = Tokens(600, 3);
  ASSERT_OK(single->Ingest(other, 128).status);
  ASSERT_OK(split->Ingest(other, 128).status);
  const auto repeated = split->Ingest(other, 128);
  ASSERT_OK(repeated.status);
  EXPECT_EQ(repeated.done.segments_reused(), repeated.done.segments_total());

  split.reset();
  single.reset();
  EXPECT_EQ(orchestrator.Stop(), 0);
  EXPECT_EQ(decode.Stop(), 0);
  EXPECT_EQ(prefill.Stop(), 0);
  EXPECT_EQ(reference_.Stop(), 0);
}

TEST_F(RadosPipelineTest, AnOsdKilledDuringIngestsLosesNothingAcknowledged) {
  ServerProcess all;
  ASSERT_TRUE(all.Start(Rados({}), dir_.path() + "/rados-all.log"))
      << all.stderr_text();
  auto client = std::make_unique<WorkflowClient>(all.address());
  constexpr int kWriters = 4;
  std::vector<std::vector<int32_t>> docs;
  for (int i = 0; i < kWriters; ++i) docs.push_back(Tokens(2500, 10 + i));
  std::vector<testing::IngestResult> results(kWriters);
  std::atomic<int> started{0};
  std::vector<std::thread> writers;
  for (int i = 0; i < kWriters; ++i) {
    writers.emplace_back([&, i] {
      WorkflowClient own(all.address());
      started.fetch_add(1);
      results[i] = own.Ingest(docs[i], 128);
    });
  }
  while (started.load() < kWriters) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(ClusterCommand({"kill-osd", "0"}), 0);
  for (std::thread& writer : writers) writer.join();

  // Writes go on with one OSD of three down.
  const std::vector<int32_t> during = Tokens(600, 99);
  const auto late = client->Ingest(during, 128);
  EXPECT_OK(late.status);
  ASSERT_EQ(ClusterCommand({"start-osd", "0"}), 0);

  std::unique_ptr<storage::Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto single = std::make_unique<WorkflowClient>(reference_.address());
  int acknowledged = 0;
  for (int i = 0; i < kWriters; ++i) {
    if (!results[i].status.ok()) {
      // Not acknowledged: allowed to fail, only as unavailable.
      EXPECT_EQ(results[i].status.error_code(), grpc::StatusCode::UNAVAILABLE)
          << results[i].status.error_message();
      continue;
    }
    ++acknowledged;
    const std::string id = results[i].done.done().document_id();
    ASSERT_OK_AND_ASSIGN(std::vector<int32_t> stored,
                         store->GetTokens({"default", id}));
    EXPECT_EQ(stored, docs[i]);
    ASSERT_OK(single->Ingest(docs[i], 128).status);
    EXPECT_EQ(client->Ask(id, "And?").tokens, single->Ask(id, "And?").tokens);
  }
  EXPECT_GE(acknowledged, kWriters / 2);
  EXPECT_EQ(ClusterCommand({"wait-clean", "120"}), 0);

  client.reset();
  single.reset();
  EXPECT_EQ(all.Stop(), 0);
  EXPECT_EQ(reference_.Stop(), 0);
}

TEST_F(RadosPipelineTest, TwoOsdsDownFailCallsInTimeAndLoseNothing) {
  ServerProcess all;
  std::vector<std::string> flags = Rados({"--state-cache-bytes=0"});
  flags.push_back("--rados-op-timeout-seconds=3");  // later flags win
  ASSERT_TRUE(all.Start(flags, dir_.path() + "/rados-all.log"))
      << all.stderr_text();
  auto client = std::make_unique<WorkflowClient>(all.address());
  const std::vector<int32_t> doc = Tokens(600, 7);
  const auto ingested = client->Ingest(doc, 128);
  ASSERT_OK(ingested.status);
  const std::string id = ingested.done.done().document_id();
  const auto before = client->Ask(id, "Who?");
  ASSERT_OK(before.status);

  ASSERT_EQ(ClusterCommand({"kill-osd", "1"}), 0);
  ASSERT_EQ(ClusterCommand({"kill-osd", "2"}), 0);
  const auto start = std::chrono::steady_clock::now();
  const auto refused = client->Ingest(Tokens(600, 8), 128);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << refused.status.error_message();
  // A few operation deadlines (the ingest's reads and its write), far
  // below the client's own deadline.
  EXPECT_LT(waited, std::chrono::seconds(40));

  ASSERT_EQ(ClusterCommand({"start-osd", "1"}), 0);
  ASSERT_EQ(ClusterCommand({"start-osd", "2"}), 0);
  ASSERT_EQ(ClusterCommand({"wait-clean", "120"}), 0);
  // Even with every OSD up and the placement groups clean, a loaded
  // (sanitized) run saw reads time out for a minute while the restarted
  // OSDs caught up: UNAVAILABLE is retried until 150 s after the restart,
  // for all the calls together; any other failure, or other tokens, is a
  // loss and fails at once.
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(150);
  const auto retried = [&](const auto& call) {
    auto result = call();
    while (result.status.error_code() == grpc::StatusCode::UNAVAILABLE &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      result = call();
    }
    return result;
  };
  const auto after = retried([&] { return client->Ask(id, "Who?"); });
  ASSERT_OK(after.status);
  EXPECT_EQ(after.tokens, before.tokens);
  std::unique_ptr<storage::Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<int32_t>> stored =
      store->GetTokens({"default", id});
  while (absl::IsUnavailable(stored.status()) &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    stored = store->GetTokens({"default", id});
  }
  ASSERT_OK(stored.status());
  EXPECT_EQ(*stored, doc);
  EXPECT_OK(
      retried([&] { return client->Ingest(Tokens(600, 8), 128); }).status);
  client.reset();
  EXPECT_EQ(all.Stop(), 0);
}

TEST_F(RadosPipelineTest, AMonitorRestartUnderIngestsFailsNone) {
  ServerProcess all;
  ASSERT_TRUE(all.Start(Rados({}), dir_.path() + "/rados-all.log"))
      << all.stderr_text();
  std::atomic<bool> done{false};
  std::vector<std::pair<std::string, std::vector<int32_t>>> acknowledged;
  std::vector<grpc::Status> failures;
  std::thread writer([&] {
    WorkflowClient own(all.address());
    for (int i = 0; !done.load() || i < 4; ++i) {
      std::vector<int32_t> doc = Tokens(300, 100 + i);
      const auto result = own.Ingest(doc, 128);
      if (result.status.ok()) {
        acknowledged.emplace_back(result.done.done().document_id(),
                                  std::move(doc));
      } else {
        failures.push_back(result.status);
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_EQ(ClusterCommand({"restart-mon", "a"}), 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  done = true;
  writer.join();
  for (const grpc::Status& failure : failures) {
    ADD_FAILURE() << failure.error_code() << " " << failure.error_message();
  }
  EXPECT_GE(acknowledged.size(), 4u);
  std::unique_ptr<storage::Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  for (const auto& [id, doc] : acknowledged) {
    ASSERT_OK_AND_ASSIGN(std::vector<int32_t> stored,
                         store->GetTokens({"default", id}));
    EXPECT_EQ(stored, doc);
  }
  EXPECT_EQ(all.Stop(), 0);
}

TEST_F(RadosPipelineTest, ADamagedStateIsRecomputedAndTheAnswerKept) {
  ServerProcess all;
  ASSERT_TRUE(all.Start(Rados({}), dir_.path() + "/rados-all.log"))
      << all.stderr_text();
  auto client = std::make_unique<WorkflowClient>(all.address());
  const auto ingested = client->Ingest(Tokens(700, 5), 128);
  ASSERT_OK(ingested.status);
  const std::string id = ingested.done.done().document_id();
  const auto before = client->Ask(id, "What is it?");
  ASSERT_OK(before.status);

  // Overwrite the state the document ends in, as `rados put` would.
  std::unique_ptr<storage::Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_OK_AND_ASSIGN(storage::DocumentRecord record,
                       store->GetDocument({"default", id}));
  const std::string object =
      storage::StateObjectName(record.segments.back().state_key);
  const std::string garbage = dir_.path() + "/garbage";
  ASSERT_EQ(RunCommand({"sh", "-c", "head -c 4096 /dev/urandom > " + garbage})
                .exit_code,
            0);
  ASSERT_EQ(RunCommand({"rados", "--conf", ClusterConf(), "-p",
                        prefix_ + "-states", "put", object, garbage})
                .exit_code,
            0);
  // The state cache of the process would still hold the good copy: a
  // restart makes the next read go to the cluster.
  client.reset();
  EXPECT_EQ(all.Stop(), 0);
  ASSERT_TRUE(all.Start(Rados({}), dir_.path() + "/rados-all.log"));
  client = std::make_unique<WorkflowClient>(all.address());
  const auto after = client->Ask(id, "What is it?");
  ASSERT_OK(after.status);
  EXPECT_EQ(after.tokens, before.tokens);
  EXPECT_GT(after.usage.tokens_prefilled(), before.usage.tokens_prefilled());
  // Recomputed and stored again, whole.
  ASSERT_OK_AND_ASSIGN(std::string state,
                       store->GetState(record.segments.back().state_key));
  EXPECT_FALSE(state.empty());
  client.reset();
  EXPECT_EQ(all.Stop(), 0);
}

TEST_F(RadosPipelineTest, WatchedRecordsNeverAnswerForAChangedDocument) {
  ServerProcess prefill, decode, asker, writer;
  ASSERT_NO_FATAL_FAILURE(StartInternalRoles(prefill, decode));
  const std::vector<std::string> internal = {
      "--role=orchestrator", "--prefill-address=" + prefill.address(),
      "--decode-address=" + decode.address()};
  std::vector<std::string> asker_flags = Rados(internal);
  asker_flags.push_back("--metrics_listen=127.0.0.1:0");
  ASSERT_TRUE(asker.Start(asker_flags, dir_.path() + "/asker.log"))
      << asker.stderr_text();
  ASSERT_TRUE(writer.Start(Rados(internal), dir_.path() + "/writer.log"))
      << writer.stderr_text();
  const int metrics_port = testing::MetricsPort(asker.stderr_text());
  ASSERT_GT(metrics_port, 0) << asker.stderr_text();
  auto counter = [&](const std::string& outcome) {
    return testing::Sample(
        testing::HttpGet(metrics_port, "/metrics"),
        "twice_ask_cached_records_total{outcome=\"" + outcome + "\"}");
  };
  WorkflowClient asks(asker.address()), writes(writer.address());

  const auto ingested = writes.Ingest(Tokens(96, 31), 32);
  ASSERT_OK(ingested.status);
  const std::string id = ingested.done.done().document_id();
  // The first ask reads the record and keeps it under a watch; the second
  // answers from it without reading.
  const auto first = asks.Ask(id, "What comes next?");
  ASSERT_OK(first.status);
  const auto again = asks.Ask(id, "What comes next?");
  ASSERT_OK(again.status);
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(counter("watched"), 1);
  EXPECT_EQ(counter("confirmed") + counter("changed"), 0);

  // Another orchestrator appends: when its call returns, the asker no
  // longer trusts what it kept, reads, and answers as the writer does.
  ASSERT_OK(writes.Append(id, Tokens(40, 32), 32).status);
  const auto current = writes.Ask(id, "What comes next?");
  ASSERT_OK(current.status);
  const auto after_append = asks.Ask(id, "What comes next?");
  ASSERT_OK(after_append.status);
  EXPECT_EQ(after_append.usage.tokens_reused(), 136);
  EXPECT_EQ(after_append.tokens, current.tokens);
  EXPECT_EQ(counter("changed"), 1);
  const std::string metrics = testing::HttpGet(metrics_port, "/metrics");
  EXPECT_GE(testing::Sample(metrics, "twice_store_record_watch_changes_total"),
            1);
  EXPECT_EQ(testing::Sample(metrics,
                            "twice_store_record_notifies_unacknowledged_total"),
            0);
  // What that read found is kept under a fresh mark.
  ASSERT_OK(asks.Ask(id, "What comes next?").status);
  EXPECT_EQ(counter("watched"), 2);

  // Deleted by the other orchestrator: NOT_FOUND, not an answer.
  ASSERT_OK(writes.Delete(id));
  const auto after_delete = asks.Ask(id, "What comes next?");
  EXPECT_EQ(after_delete.status.error_code(), grpc::StatusCode::NOT_FOUND)
      << after_delete.status.error_message();
  EXPECT_TRUE(after_delete.tokens.empty());
  EXPECT_EQ(counter("watched"), 2);

  EXPECT_EQ(asker.Stop(), 0);
  EXPECT_EQ(writer.Stop(), 0);
  EXPECT_EQ(decode.Stop(), 0);
  EXPECT_EQ(prefill.Stop(), 0);
  EXPECT_EQ(reference_.Stop(), 0);
}

}  // namespace
}  // namespace twice
