// The disaggregated deployment shape on one machine: a store role owning the
// RocksDB directory, prefill and decode roles sharing it over gRPC, and an
// orchestrator calling them — real processes on 127.0.0.1:
//   - one endpoint of each role: the basic workflow, with an orchestrator
//     that has the model's tokenizer and config but no weights; one whose
//     tokenizer.json is not the prefill's refuses to ingest;
//   - two prefill and two decode endpoints: the same answers as --role=all
//     for every causal mode, BatchAsk, as_of and Append; a prefill process
//     killed mid-ingest makes the orchestrator finish the ingest on the
//     other one (resuming from the segments already stored), a killed decode
//     process is routed around, and the store verifies clean;
//   - two orchestrator replicas appending to one document at once: the
//     catalog's conditional writes keep every append exactly once;
//   - an orchestrator answering from its cached record while another
//     replica appends to, then deletes, the document: every answer is from
//     the current record (the cached one only a guess the record read
//     confirms), seen in the answers and the record-cache counters.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/services/workflow_client.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/server_process.h"
#include "twice/v1/orchestrator.grpc.pb.h"
#include "twice/v1/store.grpc.pb.h"

namespace twice {
namespace {

using testing::CliBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::TempDir;

// Every deployment below starts from a tiny model in `dir` and a store role
// owning `dir`/store; `model` and `use_store` point the other roles at them.
class DisaggregatedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model = "--model=" + dir.path() + "/model";
    ASSERT_EQ(RunCommand(
                  {CliBinary(), "init-model", "--out=" + dir.path() + "/model"})
                  .exit_code,
              0);
    ASSERT_TRUE(
        store.Start({"--role=store", "--data-dir=" + dir.path() + "/store"},
                    dir.path() + "/store.log"))
        << store.stderr_text();
    use_store = "--store-address=" + store.address();
  }

  // A model directory with the model's config.json and tokenizer.json
  // only, named `name` under `dir`; `tokenizer_suffix` is appended to the
  // tokenizer.json (whitespace keeps it valid JSON but another file).
  std::string TokenizerOnlyCopy(const std::string& name,
                                const std::string& tokenizer_suffix = "") {
    const std::filesystem::path from = dir.path() + "/model";
    const std::filesystem::path to = dir.path() + "/" + name;
    std::filesystem::create_directories(to);
    std::filesystem::copy_file(from / "config.json", to / "config.json");
    std::filesystem::copy_file(from / "tokenizer.json", to / "tokenizer.json");
    std::ofstream(to / "tokenizer.json", std::ios::app) << tokenizer_suffix;
    return to.string();
  }

  TempDir dir;
  ServerProcess store;
  std::string model;
  std::string use_store;
};

TEST_F(DisaggregatedTest, RolesInSeparateProcessesShareOneStore) {
  ServerProcess prefill;
  ASSERT_TRUE(prefill.Start({"--role=prefill", model, use_store},
                            dir.path() + "/prefill.log"))
      << prefill.stderr_text();
  ServerProcess decode;
  ASSERT_TRUE(decode.Start({"--role=decode", model, use_store},
                           dir.path() + "/decode.log"))
      << decode.stderr_text();
  // The orchestrator only tokenizes: its model directory holds no weights.
  ServerProcess orchestrator;
  ASSERT_TRUE(orchestrator.Start(
      {"--role=orchestrator", "--model=" + TokenizerOnlyCopy("light"),
       use_store, "--prefill-address=" + prefill.address(),
       "--decode-address=" + decode.address()},
      dir.path() + "/orchestrator.log"))
      << orchestrator.stderr_text();

  auto stub = v1::Orchestrator::NewStub(grpc::CreateChannel(
      orchestrator.address(), grpc::InsecureChannelCredentials()));
  {
    // The card the orchestrator shows is the prefill's loaded model.
    grpc::ClientContext context;
    v1::ListModelsResponse models;
    ASSERT_TRUE(
        stub->ListModels(&context, v1::ListModelsRequest(), &models).ok());
    ASSERT_EQ(models.models_size(), 1);
    EXPECT_EQ(models.models(0).fingerprint().size(), 64u);
    EXPECT_GT(models.models(0).state_bytes(), 0);
    EXPECT_EQ(models.models(0).tokenizer_sha256().size(), 64u);
  }
  std::string doc_id;
  {
    grpc::ClientContext context;
    auto stream = stub->Ingest(&context);
    v1::IngestRequest request;
    request.mutable_header()->set_segment_tokens(16);
    request.set_text(
        "Disaggregated serving keeps prefill and decode apart so each scales "
        "on its own, while one store holds every document state they share.");
    ASSERT_TRUE(stream->Write(request));
    stream->WritesDone();
    v1::IngestResponse response;
    while (stream->Read(&response)) {
      if (response.has_done()) doc_id = response.done().document_id();
    }
    ASSERT_OK(stream->Finish());
  }
  ASSERT_FALSE(doc_id.empty());

  for (v1::AskMode mode : {v1::ASK_MODE_DEFAULT, v1::ASK_MODE_READ_TWICE}) {
    grpc::ClientContext context;
    v1::AskRequest request;
    request.set_document_id(doc_id);
    request.set_question("What holds the states?");
    request.set_mode(mode);
    request.mutable_sampling()->set_max_tokens(4);
    request.mutable_sampling()->set_ignore_eos(true);
    auto reader = stub->Ask(&context, request);
    v1::AskResponse response;
    v1::Usage usage;
    int tokens = 0;
    while (reader->Read(&response)) {
      tokens += response.tokens_size();
      if (response.finished()) usage = response.usage();
    }
    grpc::Status status = reader->Finish();
    ASSERT_OK(status);
    EXPECT_EQ(tokens, 4);
    EXPECT_EQ(usage.states_reused(), 1);
  }
  stub.reset();  // an open channel would hold the shutdown to its grace
  EXPECT_EQ(orchestrator.Stop(), 0);
  EXPECT_EQ(decode.Stop(), 0);
  EXPECT_EQ(prefill.Stop(), 0);
  EXPECT_EQ(store.Stop(), 0);
}

std::vector<int32_t> RandomTokens(int n, uint64_t seed) {
  std::vector<int32_t> out(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = static_cast<int32_t>((s >> 33) % 50000);
  }
  return out;
}

TEST_F(DisaggregatedTest, OrchestratorRefusesATokenizerThePrefillDoesNotUse) {
  ServerProcess prefill, decode;
  ASSERT_TRUE(prefill.Start({"--role=prefill", model, use_store},
                            dir.path() + "/prefill.log"));
  ASSERT_TRUE(decode.Start({"--role=decode", model, use_store},
                           dir.path() + "/decode.log"));
  // Another tokenizer.json: ids made with it would be read by the model as
  // other words, so nothing is ingested.
  ServerProcess orchestrator;
  ASSERT_TRUE(orchestrator.Start(
      {"--role=orchestrator", "--model=" + TokenizerOnlyCopy("other", "\n"),
       use_store, "--prefill-address=" + prefill.address(),
       "--decode-address=" + decode.address()},
      dir.path() + "/orchestrator.log"))
      << orchestrator.stderr_text();
  auto client =
      std::make_unique<testing::WorkflowClient>(orchestrator.address());
  const auto ingested = client->Ingest(RandomTokens(64, 3), 32);
  EXPECT_EQ(ingested.status.error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(ingested.status.error_message().find("tokenizer.json"),
            std::string::npos)
      << ingested.status.error_message();
  client.reset();
  EXPECT_EQ(orchestrator.Stop(), 0);
  EXPECT_EQ(decode.Stop(), 0);
  EXPECT_EQ(prefill.Stop(), 0);
  EXPECT_EQ(store.Stop(), 0);
}

TEST_F(DisaggregatedTest, SeveralEndpointsRetryAndAnswerAsRoleAll) {
  using testing::WorkflowClient;
  ServerProcess prefill[2], decode[2];
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i);
    ASSERT_TRUE(prefill[i].Start({"--role=prefill", model, use_store},
                                 dir.path() + "/prefill" + n + ".log"));
    ASSERT_TRUE(decode[i].Start({"--role=decode", model, use_store},
                                dir.path() + "/decode" + n + ".log"));
  }
  ServerProcess orchestrator;
  ASSERT_TRUE(orchestrator.Start(
      {"--role=orchestrator", model, use_store,
       "--prefill-address=" + prefill[0].address() + "," + prefill[1].address(),
       "--decode-address=" + decode[0].address() + "," + decode[1].address()},
      dir.path() + "/orchestrator.log"))
      << orchestrator.stderr_text();
  ServerProcess all;
  ASSERT_TRUE(all.Start({model, "--data-dir=" + dir.path() + "/all"},
                        dir.path() + "/all.log"));
  // Clients are closed before the servers stop: an open channel holds a
  // server's shutdown to its grace period.
  auto split_client = std::make_unique<WorkflowClient>(orchestrator.address());
  auto single_client = std::make_unique<WorkflowClient>(all.address());
  WorkflowClient& split = *split_client;
  WorkflowClient& single = *single_client;
  {
    // The orchestrator asks the first prefill endpoint which models it
    // serves; calls rotate over the endpoints, so the ingest's prefill call
    // then goes to the second.
    grpc::ClientContext context;
    v1::ListModelsResponse models;
    ASSERT_TRUE(split.orchestrator()
                    .ListModels(&context, v1::ListModelsRequest(), &models)
                    .ok());
  }

  // Kill the endpoint the ingest runs on once it has stored its first
  // segment.
  const std::vector<int32_t> doc = RandomTokens(12000, 9);
  {
    grpc::ClientContext context;
    auto stream = split.orchestrator().Ingest(&context);
    v1::IngestRequest request;
    request.mutable_header()->set_segment_tokens(128);
    request.mutable_tokens()->Add(doc.begin(), doc.end());
    stream->Write(request);
    stream->WritesDone();
    v1::IngestResponse response;
    ASSERT_TRUE(stream->Read(&response));
    prefill[1].Kill();
    v1::IngestResponse done;
    while (stream->Read(&response)) {
      if (response.has_done()) done = response;
    }
    grpc::Status status = stream->Finish();
    ASSERT_OK(status);
    // Finished on the other endpoint, from the segments already stored.
    EXPECT_GT(done.segments_reused(), 0);
    EXPECT_EQ(done.done().tokens(), 12000);
  }
  const auto reference = single.Ingest(doc, 128);
  ASSERT_OK(reference.status);
  const std::string id = reference.done.done().document_id();
  const auto repeated = split.Ingest(doc, 128);
  ASSERT_OK(repeated.status);
  EXPECT_EQ(repeated.done.done().document_id(), id);
  EXPECT_EQ(repeated.done.segments_reused(), repeated.done.segments_total());

  // Kill a decode endpoint too; calls are routed to the other one.
  decode[1].Kill();
  for (v1::AskMode mode : {v1::ASK_MODE_DEFAULT, v1::ASK_MODE_READ_TWICE,
                           v1::ASK_MODE_READ_TWICE_FULL}) {
    for (int64_t as_of : {int64_t{0}, int64_t{1000}}) {
      const auto want = single.Ask(id, "What comes next?", mode, 6, as_of);
      const auto got = split.Ask(id, "What comes next?", mode, 6, as_of);
      ASSERT_OK(want.status);
      ASSERT_OK(got.status);
      EXPECT_EQ(got.tokens, want.tokens)
          << "mode " << mode << " as_of " << as_of;
      EXPECT_EQ(got.usage.tokens_prefilled(), want.usage.tokens_prefilled());
    }
  }
  const auto appended_split = split.Append(id, RandomTokens(100, 10), 64);
  const auto appended_single = single.Append(id, RandomTokens(100, 10), 64);
  ASSERT_TRUE(appended_split.status.ok())
      << appended_split.status.error_message();
  ASSERT_OK(appended_single.status);
  EXPECT_EQ(split.Ask(id, "And then?").tokens,
            single.Ask(id, "And then?").tokens);

  // Nothing the killed process was writing left a bad value behind.
  auto store_stub = v1::Store::NewStub(
      grpc::CreateChannel(store.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext verify_context;
  v1::VerifyStoreResponse verified;
  ASSERT_OK(store_stub->Verify(&verify_context, {}, &verified));
  EXPECT_EQ(verified.bad_size(), 0);
  EXPECT_GT(verified.states_checked(), 90);

  split_client.reset();
  single_client.reset();
  store_stub.reset();
  EXPECT_EQ(orchestrator.Stop(), 0);
  EXPECT_EQ(decode[0].Stop(), 0);
  EXPECT_EQ(prefill[0].Stop(), 0);
  EXPECT_EQ(store.Stop(), 0);
  EXPECT_EQ(all.Stop(), 0);
}

TEST_F(DisaggregatedTest, TwoOrchestratorsAppendingToOneDocumentLoseNothing) {
  using testing::WorkflowClient;
  ServerProcess prefill, decode;
  ASSERT_TRUE(prefill.Start({"--role=prefill", model, use_store},
                            dir.path() + "/prefill.log"));
  ASSERT_TRUE(decode.Start({"--role=decode", model, use_store},
                           dir.path() + "/decode.log"));
  constexpr int kReplicas = 2;
  ServerProcess orchestrator[kReplicas];
  for (int r = 0; r < kReplicas; ++r) {
    ASSERT_TRUE(orchestrator[r].Start(
        {"--role=orchestrator", model, use_store,
         "--prefill-address=" + prefill.address(),
         "--decode-address=" + decode.address()},
        dir.path() + "/orchestrator" + std::to_string(r) + ".log"))
        << orchestrator[r].stderr_text();
  }
  std::unique_ptr<WorkflowClient> client[kReplicas];
  for (int r = 0; r < kReplicas; ++r) {
    client[r] = std::make_unique<WorkflowClient>(orchestrator[r].address());
  }

  const std::vector<int32_t> doc = RandomTokens(256, 21);
  const auto ingested = client[0]->Ingest(doc, 32);
  ASSERT_OK(ingested.status);
  const std::string id = ingested.done.done().document_id();

  // Each replica appends its own chunks as fast as it can; without the
  // conditional write, a record written from a stale read drops the other
  // replica's append.
  constexpr int kAppendsPerReplica = 4;
  constexpr int kChunkTokens = 24;
  std::vector<std::vector<int32_t>> chunks;
  for (int i = 0; i < kReplicas * kAppendsPerReplica; ++i) {
    chunks.push_back(RandomTokens(kChunkTokens, 100 + i));
  }
  std::vector<grpc::Status> results(chunks.size());
  std::vector<std::thread> appenders;
  for (int r = 0; r < kReplicas; ++r) {
    appenders.emplace_back([&, r] {
      for (int i = 0; i < kAppendsPerReplica; ++i) {
        const size_t chunk = r * kAppendsPerReplica + i;
        results[chunk] = client[r]->Append(id, chunks[chunk], 16).status;
      }
    });
  }
  for (std::thread& appender : appenders) appender.join();
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].ok())
        << "append " << i << ": " << results[i].error_message();
  }

  // The stored tokens are the document followed by every chunk exactly
  // once (in the order the appends committed).
  auto store_stub = v1::Store::NewStub(
      grpc::CreateChannel(store.address(), grpc::InsecureChannelCredentials()));
  std::vector<int32_t> stored;
  {
    grpc::ClientContext context;
    v1::GetTokensRequest request;
    request.set_tenant("default");
    request.set_document_id(id);
    auto reader = store_stub->GetTokens(&context, request);
    v1::TokenChunk piece;
    while (reader->Read(&piece)) {
      stored.insert(stored.end(), piece.tokens().begin(), piece.tokens().end());
    }
    ASSERT_OK(reader->Finish());
  }
  ASSERT_EQ(stored.size(), doc.size() + chunks.size() * kChunkTokens);
  EXPECT_TRUE(std::equal(doc.begin(), doc.end(), stored.begin()));
  std::vector<int> seen(chunks.size(), 0);
  for (size_t at = doc.size(); at < stored.size(); at += kChunkTokens) {
    bool matched = false;
    for (size_t c = 0; c < chunks.size(); ++c) {
      if (std::equal(chunks[c].begin(), chunks[c].end(),
                     stored.begin() + static_cast<std::ptrdiff_t>(at))) {
        ++seen[c];
        matched = true;
      }
    }
    EXPECT_TRUE(matched) << "tokens at " << at << " are no appended chunk";
  }
  for (size_t c = 0; c < chunks.size(); ++c) {
    EXPECT_EQ(seen[c], 1) << "chunk " << c;
  }

  // Both replicas answer from the last state of the whole document.
  for (int r = 0; r < kReplicas; ++r) {
    const auto answer = client[r]->Ask(id, "What comes next?");
    ASSERT_OK(answer.status);
    EXPECT_EQ(answer.usage.states_reused(), 1);
  }
  grpc::ClientContext verify_context;
  v1::VerifyStoreResponse verified;
  ASSERT_OK(store_stub->Verify(&verify_context, {}, &verified));
  EXPECT_EQ(verified.bad_size(), 0);

  for (auto& c : client) c.reset();
  store_stub.reset();
  for (auto& o : orchestrator) EXPECT_EQ(o.Stop(), 0);
  EXPECT_EQ(decode.Stop(), 0);
  EXPECT_EQ(prefill.Stop(), 0);
  EXPECT_EQ(store.Stop(), 0);
}

TEST_F(DisaggregatedTest, CachedRecordsNeverAnswerForAChangedDocument) {
  using testing::WorkflowClient;
  ServerProcess prefill, decode;
  ASSERT_TRUE(prefill.Start({"--role=prefill", model, use_store},
                            dir.path() + "/prefill.log"));
  ASSERT_TRUE(decode.Start({"--role=decode", model, use_store},
                           dir.path() + "/decode.log"));
  ServerProcess asker, writer;
  ASSERT_TRUE(asker.Start(
      {"--role=orchestrator", model, use_store,
       "--prefill-address=" + prefill.address(),
       "--decode-address=" + decode.address(), "--metrics_listen=127.0.0.1:0"},
      dir.path() + "/asker.log"))
      << asker.stderr_text();
  ASSERT_TRUE(writer.Start({"--role=orchestrator", model, use_store,
                            "--prefill-address=" + prefill.address(),
                            "--decode-address=" + decode.address()},
                           dir.path() + "/writer.log"))
      << writer.stderr_text();
  const int metrics_port = testing::MetricsPort(asker.stderr_text());
  ASSERT_GT(metrics_port, 0) << asker.stderr_text();
  auto counter = [&](const std::string& outcome) {
    return testing::Sample(
        testing::HttpGet(metrics_port, "/metrics"),
        "twice_ask_cached_records_total{outcome=\"" + outcome + "\"}");
  };
  WorkflowClient asks(asker.address()), writes(writer.address());

  const std::vector<int32_t> doc = RandomTokens(96, 31);
  const auto ingested = writes.Ingest(doc, 32);
  ASSERT_OK(ingested.status);
  const std::string id = ingested.done.done().document_id();

  // The first ask reads the record and keeps it; the second starts from
  // the kept one, which the record read confirms.
  const auto first = asks.Ask(id, "What comes next?");
  ASSERT_OK(first.status);
  EXPECT_EQ(first.usage.tokens_reused(), 96);
  const auto again = asks.Ask(id, "What comes next?");
  ASSERT_OK(again.status);
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(counter("confirmed"), 1);

  // Another replica appends: the asker's kept record is stale, and its
  // answer is the one the writer gives from the current record.
  ASSERT_OK(writes.Append(id, RandomTokens(40, 32), 32).status);
  const auto current = writes.Ask(id, "What comes next?");
  ASSERT_OK(current.status);
  const auto after_append = asks.Ask(id, "What comes next?");
  ASSERT_OK(after_append.status);
  EXPECT_EQ(after_append.usage.tokens_reused(), 136);
  EXPECT_EQ(after_append.tokens, current.tokens);
  EXPECT_EQ(after_append.text, current.text);
  EXPECT_EQ(counter("changed"), 1);

  // Deleted by the other replica: NOT_FOUND, not an answer from the kept
  // record (whose state may still be cached by decode).
  ASSERT_OK(asks.Ask(id, "What comes next?").status);  // kept again
  ASSERT_OK(writes.Delete(id));
  const auto after_delete = asks.Ask(id, "What comes next?");
  EXPECT_EQ(after_delete.status.error_code(), grpc::StatusCode::NOT_FOUND)
      << after_delete.status.error_message();
  EXPECT_TRUE(after_delete.tokens.empty());
  EXPECT_EQ(counter("changed"), 2);

  EXPECT_EQ(asker.Stop(), 0);
  EXPECT_EQ(writer.Stop(), 0);
  EXPECT_EQ(decode.Stop(), 0);
  EXPECT_EQ(prefill.Stop(), 0);
  EXPECT_EQ(store.Stop(), 0);
}

}  // namespace
}  // namespace twice
