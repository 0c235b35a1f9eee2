// RemoteStateStore against a real StoreService on 127.0.0.1:0 backed by a
// real RocksDB: the store role behaves like the embedded store, and values
// far larger than gRPC's 4 MiB message limit travel in chunks.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <random>

#include "gtest/gtest.h"
#include "services/store/remote_state_store.h"
#include "services/store/store_service.h"
#include "storage/rocksdb_store.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"

namespace twice::services {
namespace {

class RemoteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::RocksDbStoreOptions options;
    options.path = dir_.path() + "/store";
    options.sync_writes = false;
    auto store = storage::OpenRocksDbStore(options);
    ASSERT_OK(store);
    local_ = *std::move(store);
    service_ = std::make_unique<StoreService>(local_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(16 << 20);
    remote_ = std::make_unique<RemoteStateStore>(
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                  grpc::InsecureChannelCredentials(), args),
        std::chrono::seconds(30));
  }
  void TearDown() override {
    remote_.reset();
    server_->Shutdown();
    server_.reset();
    service_.reset();
    local_.reset();
  }

  testing::TempDir dir_;
  std::unique_ptr<storage::Store> local_;
  std::unique_ptr<StoreService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<RemoteStateStore> remote_;
};

TEST_F(RemoteStoreTest, LargeStateRoundTripsInChunks) {
  std::string blob(9 << 20, '\0');
  std::mt19937 rng(7);
  for (char& c : blob) c = static_cast<char>(rng());
  const storage::StateKey key = storage::ChainKey(
      storage::RootKey("fingerprint", "causal", "tenant"), {1, 2, 3});
  ASSERT_OK(remote_->PutState(key, blob, {}));
  auto has = remote_->HasState(key);
  ASSERT_OK(has);
  EXPECT_TRUE(*has);
  auto read = remote_->GetState(key);
  ASSERT_OK(read);
  EXPECT_EQ(*read, blob);
  // The same bytes are visible through the embedded store.
  auto local = local_->GetState(key);
  ASSERT_OK(local);
  EXPECT_EQ(*local, blob);
  ASSERT_OK(remote_->DeleteState(key));
  EXPECT_EQ(remote_->GetState(key).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RemoteStoreTest, DocumentsRoundTripWithManyTokens) {
  const storage::StateKey root = storage::RootKey("fp", "causal", "t1");
  storage::DocumentRecord record;
  record.tenant = "t1";
  record.document_id = "doc-1";
  record.model = "default";
  record.model_fingerprint = "fp";
  record.token_count = 200000;  // several token chunks
  record.segment_tokens = 100000;
  record.segments = {{100000, storage::ChainKey(root, {1})},
                     {200000, storage::ChainKey(root, {2})}};
  std::vector<int32_t> tokens(record.token_count);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>(i % 50000);
  ASSERT_OK(remote_->PutDocument(record, tokens));

  auto got = remote_->GetDocument({"t1", "doc-1"});
  ASSERT_OK(got);
  EXPECT_EQ(got->token_count, record.token_count);
  ASSERT_EQ(got->segments.size(), 2u);
  EXPECT_EQ(got->segments[1].state_key, record.segments[1].state_key);
  auto got_tokens = remote_->GetTokens({"t1", "doc-1"});
  ASSERT_OK(got_tokens);
  EXPECT_EQ(*got_tokens, tokens);

  // Writes are conditional on the revision read (document_catalog.h).
  record.pinned = true;
  EXPECT_EQ(remote_->UpdateDocument(record).code(), absl::StatusCode::kAborted);
  record.revision = got->revision;
  ASSERT_OK(remote_->UpdateDocument(record));
  EXPECT_TRUE(remote_->GetDocument({"t1", "doc-1"})->pinned);

  auto page = remote_->ListDocuments("t1", 10, "");
  ASSERT_OK(page);
  ASSERT_EQ(page->records.size(), 1u);
  EXPECT_EQ(remote_->GetDocument({"t2", "doc-1"}).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_OK(remote_->DeleteDocument({"t1", "doc-1"}));
  EXPECT_EQ(remote_->GetDocument({"t1", "doc-1"}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RemoteStoreTest, UnreachableStoreIsUnavailable) {
  // A remote store that cannot be reached answers UNAVAILABLE, not a crash.
  RemoteStateStore unreachable(
      grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()),
      std::chrono::seconds(2));
  const storage::StateKey key = storage::RootKey("fp", "causal", "t");
  const absl::StatusCode code = unreachable.GetState(key).status().code();
  EXPECT_TRUE(code == absl::StatusCode::kUnavailable ||
              code == absl::StatusCode::kDeadlineExceeded)
      << code;
}

}  // namespace
}  // namespace twice::services
