// ListStates through the store role: RemoteStateStore against real
// StoreService servers on 127.0.0.1:0, each over its own RocksDB, and a
// ShardedStateStore over two of them, which lists every replica's states
// once, page by page, with page tokens that name the replica.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "services/store/remote_state_store.h"
#include "services/store/sharded_state_store.h"
#include "services/store/store_service.h"
#include "storage/rocksdb_store.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace twice::services {
namespace {

// One store role in process: RocksDB, its StoreService, a gRPC server.
struct StoreServer {
  explicit StoreServer(const std::string& path) {
    storage::RocksDbStoreOptions options;
    options.path = path;
    options.sync_writes = false;
    absl::StatusOr<std::unique_ptr<storage::Store>> opened =
        storage::OpenRocksDbStore(options);
    EXPECT_OK(opened);
    if (!opened.ok()) return;
    store = *std::move(opened);
    service = std::make_unique<StoreService>(store.get());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
  }
  ~StoreServer() {
    if (server != nullptr) server->Shutdown();
  }
  std::unique_ptr<RemoteStateStore> Client() const {
    return std::make_unique<RemoteStateStore>(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                            grpc::InsecureChannelCredentials()),
        std::chrono::seconds(30));
  }

  std::unique_ptr<storage::Store> store;
  std::unique_ptr<StoreService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

storage::StateKey KeyOf(int i) {
  return storage::ChainKey(storage::RootKey("fp", "causal", "t"), {i});
}

TEST(ShardedStateListingTest, EveryReplicasStatesOnceThroughTheStoreRole) {
  testing::TempDir dir;
  StoreServer a(dir.path() + "/a"), b(dir.path() + "/b");
  ASSERT_NE(a.port, 0);
  ASSERT_NE(b.port, 0);
  std::vector<StoreShard> shards;
  shards.push_back({"store-a", a.Client()});
  shards.push_back({"store-b", b.Client()});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ShardedStateStore> sharded,
                       ShardedStateStore::Create(std::move(shards)));
  std::set<std::string> put;
  for (int i = 0; i < 17; ++i) {
    storage::PutStateOptions options;
    options.tenant = "t";
    ASSERT_OK(sharded->PutState(KeyOf(i), std::string(40 + i, 'x'), options));
    put.insert(KeyOf(i).Hex());
  }
  // Rendezvous hashing spread them: both replicas hold some.
  ASSERT_OK_AND_ASSIGN(storage::StatePage on_a, a.store->ListStates(0, ""));
  ASSERT_OK_AND_ASSIGN(storage::StatePage on_b, b.store->ListStates(0, ""));
  ASSERT_GT(on_a.states.size(), 0u);
  ASSERT_GT(on_b.states.size(), 0u);
  EXPECT_EQ(on_a.states.size() + on_b.states.size(), put.size());

  for (int page_size : {1, 4, static_cast<int>(on_a.states.size()), 0}) {
    std::multiset<std::string> listed;
    std::string token;
    int pages = 0;
    do {
      ASSERT_OK_AND_ASSIGN(storage::StatePage page,
                           sharded->ListStates(page_size, token));
      if (page_size > 0) {
        EXPECT_LE(static_cast<int>(page.states.size()), page_size);
      }
      for (const storage::StateListing& state : page.states) {
        listed.insert(state.key.Hex());
        EXPECT_EQ(state.tenant, "t");
        EXPECT_GT(state.stored_bytes, 40);
      }
      token = page.next_page_token;
      ASSERT_LT(++pages, 100);
    } while (!token.empty());
    EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), put)
        << "page size " << page_size;
    EXPECT_EQ(listed.size(), put.size()) << "page size " << page_size;
  }
  EXPECT_EQ(sharded->ListStates(5, "9:").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sharded->ListStates(5, "0:zz").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::services
