// The disaggregated deployment shape on one machine: a store role owning the
// RocksDB directory, prefill and decode roles sharing it over gRPC, and an
// orchestrator calling them — five real processes on 127.0.0.1.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/services/server_process.h"
#include "twice/v1/orchestrator.grpc.pb.h"

namespace twice {
namespace {

using testing::CliBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::TempDir;

TEST(DisaggregatedTest, RolesInSeparateProcessesShareOneStore) {
  TempDir dir;
  const std::string model = "--model=" + dir.path() + "/model";
  ASSERT_EQ(RunCommand({CliBinary(), "init-model", "--out=" + dir.path() + "/model"})
                .exit_code,
            0);

  ServerProcess store;
  ASSERT_TRUE(store.Start({"--role=store", "--data-dir=" + dir.path() + "/store"},
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
  ASSERT_TRUE(orchestrator.Start(
      {"--role=orchestrator", model, use_store,
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
  EXPECT_EQ(orchestrator.Stop(), 0);
  EXPECT_EQ(decode.Stop(), 0);
  EXPECT_EQ(prefill.Stop(), 0);
  EXPECT_EQ(store.Stop(), 0);
}

}  // namespace
}  // namespace twice
