// The budgets one tenant shares with the others, on a real twice-server
// (role all, the built-in default model, a real RocksDB): pinned documents
// per tenant, stored segments per document, and the ingest quota charged
// only for requests that pass their size checks.
#include <grpcpp/client_context.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/services/workflow_client.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"
#include "twice/v1/orchestrator.grpc.pb.h"

namespace twice::services {
namespace {

using testing::IngestResult;
using testing::ServerProcess;
using testing::TempDir;
using testing::WorkflowClient;

std::vector<int32_t> BudgetTokens(int count, int first) {
  std::vector<int32_t> tokens(count);
  for (int i = 0; i < count; ++i) tokens[i] = first + i;
  return tokens;
}

grpc::Status Pin(WorkflowClient& client, const std::string& id, bool pinned) {
  grpc::ClientContext context;
  context.set_deadline(WorkflowClient::Deadline(30));
  v1::PinDocumentRequest request;
  request.set_document_id(id);
  request.set_pinned(pinned);
  v1::DocumentInfo info;
  return client.orchestrator().PinDocument(&context, request, &info);
}

IngestResult IngestPinned(WorkflowClient& client, const std::string& id,
                          int first) {
  grpc::ClientContext context;
  context.set_deadline(WorkflowClient::Deadline(60));
  auto stream = client.orchestrator().Ingest(&context);
  v1::IngestRequest request;
  request.mutable_header()->set_document_id(id);
  request.mutable_header()->set_pin(true);
  const std::vector<int32_t> tokens = BudgetTokens(40, first);
  request.mutable_tokens()->Add(tokens.begin(), tokens.end());
  stream->Write(request);
  stream->WritesDone();
  IngestResult result;
  v1::IngestResponse response;
  while (stream->Read(&response)) result.done = response;
  result.status = stream->Finish();
  return result;
}

TEST(TenantBudgetsTest, PinnedDocumentsPerTenantAreBounded) {
  TempDir dir;
  ServerProcess server;
  ASSERT_TRUE(server.Start({"--data-dir=" + dir.path() + "/data",
                            "--max-pinned-documents-per-tenant=2"},
                           dir.path() + "/server.log"))
      << server.stderr_text();
  WorkflowClient client(server.address());
  ASSERT_OK(IngestPinned(client, "p1", 100).status);
  ASSERT_OK(IngestPinned(client, "p2", 200).status);
  const IngestResult third = IngestPinned(client, "p3", 300);
  EXPECT_EQ(third.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(
      third.status.error_message().find("max_pinned_documents_per_tenant"),
      std::string::npos)
      << third.status.error_message();
  // Re-ingesting a pinned document is not one more pin.
  EXPECT_OK(IngestPinned(client, "p1", 100).status);
  // Pinning an unpinned document counts too; unpinning makes room.
  ASSERT_OK(client.Ingest(BudgetTokens(40, 400), 0, "u1").status);
  EXPECT_EQ(Pin(client, "u1", true).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  ASSERT_OK(Pin(client, "p2", false));
  EXPECT_OK(Pin(client, "u1", true));
  EXPECT_TRUE(Pin(client, "u1", true).ok());  // already pinned: no change
}

TEST(TenantBudgetsTest, StoredSegmentsPerDocumentAreBounded) {
  TempDir dir;
  ServerProcess server;
  ASSERT_TRUE(server.Start(
      {"--data-dir=" + dir.path() + "/data", "--max-segments-per-document=4"},
      dir.path() + "/server.log"))
      << server.stderr_text();
  WorkflowClient client(server.address());
  // 100 tokens in segments of 16 would be 7 stored states.
  const IngestResult small = client.Ingest(BudgetTokens(100, 50), 16, "small");
  EXPECT_EQ(small.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(small.status.error_message().find("at least 25"), std::string::npos)
      << small.status.error_message();
  // Segments of 25 fit: 4 states.
  const IngestResult fits = client.Ingest(BudgetTokens(100, 50), 25, "fits");
  ASSERT_OK(fits.status);
  EXPECT_EQ(fits.done.done().segments_size(), 4);
  // The document is full: an append needs a new segment.
  EXPECT_EQ(client.Append("fits", BudgetTokens(10, 500), 0).status.error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Below the minimum segment size.
  EXPECT_EQ(client.Ingest(BudgetTokens(100, 50), 8, "tiny").status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(TenantBudgetsTest, RefusedIngestsAreNotChargedToTheQuota) {
  TempDir dir;
  ServerProcess server;
  ASSERT_TRUE(server.Start(
      {"--data-dir=" + dir.path() + "/data",
       "--max-ingest-tokens-per-minute=500", "--max-document-tokens=300"},
      dir.path() + "/server.log"))
      << server.stderr_text();
  WorkflowClient client(server.address());
  // Each refused for its size, never for the quota, and never charged.
  for (int i = 0; i < 3; ++i) {
    const IngestResult big = client.Ingest(BudgetTokens(400, 10), 0, "big");
    EXPECT_EQ(big.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(big.status.error_message().find("max_document_tokens"),
              std::string::npos)
        << big.status.error_message();
  }
  const IngestResult bad_segment =
      client.Ingest(BudgetTokens(250, 10), 3, "seg");
  EXPECT_EQ(bad_segment.status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // The whole quota is still there.
  const IngestResult ok = client.Ingest(BudgetTokens(250, 10), 0, "ok");
  EXPECT_OK(ok.status);
  const IngestResult next = client.Ingest(BudgetTokens(250, 700), 0, "next");
  EXPECT_OK(next.status);
  EXPECT_EQ(client.Ingest(BudgetTokens(10, 900), 0, "over").status.error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
}

}  // namespace
}  // namespace twice::services
