// The disaggregated deployment shape on one machine: a store role owning the
// RocksDB directory, prefill and decode roles sharing it over gRPC, and an
// orchestrator calling them — real processes on 127.0.0.1:
//   - one endpoint of each role: the basic workflow;
//   - two prefill and two decode endpoints: the same answers as --role=all
//     for every causal mode, BatchAsk, as_of and Append; a prefill process
//     killed mid-ingest makes the orchestrator finish the ingest on the
//     other one (resuming from the segments already stored), a killed decode
//     process is routed around, and the store verifies clean.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/services/workflow_client.h"
#include "tests/testing/server_process.h"
#include "twice/v1/orchestrator.grpc.pb.h"
#include "twice/v1/store.grpc.pb.h"

namespace twice {
namespace {

using testing::CliBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::TempDir;

TEST(DisaggregatedTest, RolesInSeparateProcessesShareOneStore) {
  TempDir dir;
  const std::string model = "--model=" + dir.path() + "/model";
  ASSERT_EQ(
      RunCommand({CliBinary(), "init-model", "--out=" + dir.path() + "/model"})
          .exit_code,
      0);

  ServerProcess store;
  ASSERT_TRUE(
      store.Start({"--role=store", "--data-dir=" + dir.path() + "/store"},
                  dir.path() + "/store.log"))
      << store.stderr_text();
  const std::string use_store = "--store-address=" + store.address();
  ServerProcess prefill;
  ASSERT_TRUE(prefill.Start({"--role=prefill", model, use_store},
                            dir.path() + "/prefill.log"))
      << prefill.stderr_text();
  ServerProcess decode;
  ASSERT_TRUE(decode.Start({"--role=decode", model, use_store},
                           dir.path() + "/decode.log"))
      << decode.stderr_text();
  ServerProcess orchestrator;
  ASSERT_TRUE(orchestrator.Start({"--role=orchestrator", model, use_store,
                                  "--prefill-address=" + prefill.address(),
                                  "--decode-address=" + decode.address()},
                                 dir.path() + "/orchestrator.log"))
      << orchestrator.stderr_text();

  auto stub = v1::Orchestrator::NewStub(grpc::CreateChannel(
      orchestrator.address(), grpc::InsecureChannelCredentials()));
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
    ASSERT_TRUE(stream->Finish().ok());
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
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(tokens, 4);
    EXPECT_EQ(usage.states_reused(), 1);
  }
  stub.reset();  // an open channel would hold the shutdown to its grace
  EXPECT_EQ(orchestrator.Stop(), 0);
  EXPECT_EQ(decode.Stop(), 0);
  EXPECT_EQ(prefill.Stop(), 0);
  EXPECT_EQ(store.Stop(), 0);
}

std::vector<int32_t> Tokens(int n, uint64_t seed) {
  std::vector<int32_t> out(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = static_cast<int32_t>((s >> 33) % 50000);
  }
  return out;
}

TEST(DisaggregatedTest, SeveralEndpointsRetryAndAnswerAsRoleAll) {
  using testing::WorkflowClient;
  TempDir dir;
  const std::string model = "--model=" + dir.path() + "/model";
  ASSERT_EQ(
      RunCommand({CliBinary(), "init-model", "--out=" + dir.path() + "/model"})
          .exit_code,
      0);
  ServerProcess store;
  ASSERT_TRUE(
      store.Start({"--role=store", "--data-dir=" + dir.path() + "/store"},
                  dir.path() + "/store.log"))
      << store.stderr_text();
  const std::string use_store = "--store-address=" + store.address();
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

  // The orchestrator's first prefill call goes to the first endpoint: kill
  // it once the ingest has stored its first segment.
  const std::vector<int32_t> doc = Tokens(12000, 9);
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
    prefill[0].Kill();
    v1::IngestResponse done;
    while (stream->Read(&response)) {
      if (response.has_done()) done = response;
    }
    grpc::Status status = stream->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
    // Finished on the other endpoint, from the segments already stored.
    EXPECT_GT(done.segments_reused(), 0);
    EXPECT_EQ(done.done().tokens(), 12000);
  }
  const auto reference = single.Ingest(doc, 128);
  ASSERT_TRUE(reference.status.ok());
  const std::string id = reference.done.done().document_id();
  const auto repeated = split.Ingest(doc, 128);
  ASSERT_TRUE(repeated.status.ok()) << repeated.status.error_message();
  EXPECT_EQ(repeated.done.done().document_id(), id);
  EXPECT_EQ(repeated.done.segments_reused(), repeated.done.segments_total());

  // Kill a decode endpoint too; calls are routed to the other one.
  decode[1].Kill();
  for (v1::AskMode mode : {v1::ASK_MODE_DEFAULT, v1::ASK_MODE_READ_TWICE,
                           v1::ASK_MODE_READ_TWICE_FULL}) {
    for (int64_t as_of : {int64_t{0}, int64_t{1000}}) {
      const auto want = single.Ask(id, "What comes next?", mode, 6, as_of);
      const auto got = split.Ask(id, "What comes next?", mode, 6, as_of);
      ASSERT_TRUE(want.status.ok()) << want.status.error_message();
      ASSERT_TRUE(got.status.ok()) << got.status.error_message();
      EXPECT_EQ(got.tokens, want.tokens)
          << "mode " << mode << " as_of " << as_of;
      EXPECT_EQ(got.usage.tokens_prefilled(), want.usage.tokens_prefilled());
    }
  }
  const auto appended_split = split.Append(id, Tokens(100, 10), 64);
  const auto appended_single = single.Append(id, Tokens(100, 10), 64);
  ASSERT_TRUE(appended_split.status.ok())
      << appended_split.status.error_message();
  ASSERT_TRUE(appended_single.status.ok());
  EXPECT_EQ(split.Ask(id, "And then?").tokens,
            single.Ask(id, "And then?").tokens);

  // Nothing the killed process was writing left a bad value behind.
  auto store_stub = v1::Store::NewStub(
      grpc::CreateChannel(store.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext verify_context;
  v1::VerifyStoreResponse verified;
  ASSERT_TRUE(store_stub->Verify(&verify_context, {}, &verified).ok());
  EXPECT_EQ(verified.bad_size(), 0);
  EXPECT_GT(verified.states_checked(), 90);

  split_client.reset();
  single_client.reset();
  store_stub.reset();
  EXPECT_EQ(orchestrator.Stop(), 0);
  EXPECT_EQ(decode[0].Stop(), 0);
  EXPECT_EQ(prefill[1].Stop(), 0);
  EXPECT_EQ(store.Stop(), 0);
  EXPECT_EQ(all.Stop(), 0);
}

}  // namespace
}  // namespace twice
