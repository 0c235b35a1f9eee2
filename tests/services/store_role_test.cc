// The store role as its own process (`twice-server --role=store`): the same
// StateStore interface over gRPC, chunked states and administration
// included, shared by threads of this process and by other processes
// reading and writing the same keys, none of which may ever see a torn or
// mixed value.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <spawn.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "services/store/remote_state_store.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"

extern char** environ;

namespace twice::services {
namespace {

constexpr int kKeys = 6;
constexpr char kWorkerEnv[] = "TWICE_STORE_ROLE_WORKER";

storage::StateKey RoleKey(int i) {
  return storage::ChainKey(storage::RootKey("fp", "causal", "shared"),
                           std::vector<int32_t>{i});
}

storage::StateKey TenantKey(const std::string& tenant, int i) {
  return storage::ChainKey(storage::RootKey("fp", "causal", tenant),
                           std::vector<int32_t>{i});
}

// A value that names its key, writer and version in its first bytes and is
// otherwise determined by them, sized past one gRPC chunk: any mix of two
// writes, or a torn one, fails Valid.
std::string Value(int key, int writer, int version) {
  const size_t size = (1 << 20) + 4096 * static_cast<size_t>(version % 64);
  std::string value(size, '\0');
  uint64_t x = (static_cast<uint64_t>(key) << 40) ^
               (static_cast<uint64_t>(writer) << 20) ^
               static_cast<uint64_t>(version) ^ 0x9e3779b97f4a7c15ULL;
  for (size_t i = 0; i + 8 <= size; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(value.data() + i, &x, 8);
  }
  std::memcpy(value.data(), &key, 4);
  std::memcpy(value.data() + 4, &writer, 4);
  std::memcpy(value.data() + 8, &version, 4);
  return value;
}

bool Valid(int key, const std::string& value) {
  if (value.size() < 12) return false;
  int stored_key, writer, version;
  std::memcpy(&stored_key, value.data(), 4);
  std::memcpy(&writer, value.data() + 4, 4);
  std::memcpy(&version, value.data() + 8, 4);
  return stored_key == key && version >= 0 && version < 100000 &&
         value == Value(key, writer, version);
}

// Writes and reads the shared keys; returns the number of bad reads (or -1
// when a call failed for any reason but a miss).
int ReadWriteLoop(storage::StateStore& store, int writer, int rounds) {
  int bad = 0;
  for (int round = 0; round < rounds; ++round) {
    const int key = (round + writer) % kKeys;
    if (!store.PutState(RoleKey(key), Value(key, writer, round), {}).ok()) {
      return -1;
    }
    const int other = (round * 5 + writer + 1) % kKeys;
    absl::StatusOr<std::string> got = store.GetState(RoleKey(other));
    if (!got.ok()) {
      if (got.status().code() != absl::StatusCode::kNotFound) return -1;
      continue;
    }
    if (!Valid(other, *got)) bad += 1;
  }
  return bad;
}

std::unique_ptr<RemoteStateStore> Connect(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 << 20);
  return std::make_unique<RemoteStateStore>(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                args),
      std::chrono::seconds(60));
}

class StoreRoleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> flags = {"--role=store",
                                      "--data-dir=" + dir_.path() + "/store"};
    for (const std::string& flag : ExtraFlags()) flags.push_back(flag);
    ASSERT_TRUE(server_.Start(flags, dir_.path() + "/server.log"))
        << server_.stderr_text();
    store_ = Connect(server_.address());
  }
  virtual std::vector<std::string> ExtraFlags() const { return {}; }
  void TearDown() override {
    store_.reset();
    EXPECT_EQ(server_.Stop(), 0);
  }

  testing::TempDir dir_;
  testing::ServerProcess server_;
  std::unique_ptr<RemoteStateStore> store_;
};

TEST_F(StoreRoleTest, ChunkedStatesTravelAsNewBlocksOnly) {
  std::vector<std::string> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(Value(i, 9, i));  // 1 MiB+ each
  std::vector<std::string_view> first(blocks.begin(), blocks.begin() + 3);
  ASSERT_TRUE(store_
                  ->PutStateBlocks(RoleKey(1), std::nullopt, first,
                                   {.recompute_tokens = 3000})
                  .ok());
  std::vector<std::string_view> appended = {blocks[3]};
  ASSERT_TRUE(store_
                  ->PutStateBlocks(RoleKey(2), RoleKey(1), appended,
                                   {.recompute_tokens = 4000})
                  .ok());
  absl::StatusOr<std::vector<std::string>> got =
      store_->GetStateBlocks(RoleKey(2));
  ASSERT_OK(got);
  EXPECT_TRUE(*got == blocks);
  absl::StatusOr<std::string> whole = store_->GetState(RoleKey(2));
  ASSERT_OK(whole);
  EXPECT_EQ(whole->size(), blocks[0].size() + blocks[1].size() +
                               blocks[2].size() + blocks[3].size());
  const storage::StoreStats stats = store_->Stats();
  EXPECT_EQ(stats.block_count, 4);
  EXPECT_EQ(stats.state_count, 2);
  EXPECT_EQ(store_->PutStateBlocks(RoleKey(3), RoleKey(9), appended, {}).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(StoreRoleTest, AdministrationAndCorruptionReportsWorkRemotely) {
  ASSERT_OK(store_->PutState(RoleKey(1), Value(1, 0, 0), {}));
  absl::StatusOr<storage::VerifyReport> verified = store_->Verify({});
  ASSERT_OK(verified);
  EXPECT_EQ(verified->states_checked, 1);
  EXPECT_TRUE(verified->bad.empty());
  absl::StatusOr<storage::CompactReport> compacted = store_->Compact();
  ASSERT_OK(compacted);
  EXPECT_GT(compacted->disk_bytes_after, 1 << 20);
  ASSERT_OK(store_->DeleteState(RoleKey(1)));
  absl::StatusOr<storage::GcReport> collected = store_->CollectGarbage();
  ASSERT_OK(collected);
  EXPECT_LT(collected->disk_bytes_after, 1 << 20);

  // A consumer that finds a served state corrupt reports it back.
  ASSERT_OK(store_->PutState(RoleKey(2), Value(2, 0, 0), {}));
  ASSERT_OK(store_->GetState(RoleKey(2)));
  ASSERT_OK(store_->DiscardCorruptState(RoleKey(2)));
  const storage::StoreStats stats = store_->Stats();
  EXPECT_EQ(stats.corruptions, 1);
  EXPECT_EQ(stats.misses, 1);
  EXPECT_FALSE(*store_->HasState(RoleKey(2)));
}

TEST_F(StoreRoleTest, ConcurrentThreadsAndProcessesNeverSeeTornValues) {
  // Two other processes (this test binary again, as workers) and two
  // threads here write and read the same keys at once.
  std::vector<pid_t> workers;
  for (int w = 0; w < 2; ++w) {
    const std::string filter = "--gtest_filter=StoreRoleWorker.ReadWriteLoop";
    const std::string env_address =
        std::string(kWorkerEnv) + "=" + server_.address();
    const std::string env_writer =
        "TWICE_STORE_ROLE_WRITER=" + std::to_string(10 + w);
    std::vector<std::string> env_strings = {env_address, env_writer};
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    std::vector<char*> envp;
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string self = "/proc/self/exe";
    std::vector<char*> argv = {self.data(), const_cast<char*>(filter.c_str()),
                               nullptr};
    pid_t pid = -1;
    ASSERT_EQ(posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(),
                          envp.data()),
              0);
    workers.push_back(pid);
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<RemoteStateStore> store = Connect(server_.address());
      const int result = ReadWriteLoop(*store, t, 40);
      bad += result == 0 ? 0 : 1;
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (pid_t pid : workers) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "worker process failed: " << status;
  }
  EXPECT_EQ(bad.load(), 0);
  for (int key = 0; key < kKeys; ++key) {
    absl::StatusOr<std::string> got = store_->GetState(RoleKey(key));
    ASSERT_OK(got);
    EXPECT_TRUE(Valid(key, *got));
  }
}

// Room for one 1 MiB state of each tenant, not two.
constexpr int64_t kTenantBudget = (3 << 20) / 2;

class StoreRoleTenantBudgetTest : public StoreRoleTest {
 protected:
  std::vector<std::string> ExtraFlags() const override {
    return {"--tenant_state_budget_bytes=" + std::to_string(kTenantBudget)};
  }
};

TEST_F(StoreRoleTenantBudgetTest, TenantTravelsWithEveryPut) {
  auto has = [&](const storage::StateKey& key) {
    absl::StatusOr<bool> stored = store_->HasState(key);
    EXPECT_OK(stored);
    return stored.ok() && *stored;
  };
  ASSERT_TRUE(
      store_->PutState(TenantKey("a", 1), Value(1, 0, 0), {.tenant = "a"})
          .ok());
  ASSERT_TRUE(
      store_->PutState(TenantKey("b", 1), Value(1, 1, 0), {.tenant = "b"})
          .ok());
  // a's second state evicts a's first, never b's.
  ASSERT_TRUE(
      store_->PutState(TenantKey("a", 2), Value(2, 0, 0), {.tenant = "a"})
          .ok());
  EXPECT_FALSE(has(TenantKey("a", 1)));
  EXPECT_TRUE(has(TenantKey("a", 2)));
  EXPECT_TRUE(has(TenantKey("b", 1)));
  EXPECT_EQ(store_->Stats().evictions, 1);

  // So does a chunked state's.
  const std::string block = Value(3, 0, 0);
  const std::vector<std::string_view> blocks = {block};
  ASSERT_TRUE(store_
                  ->PutStateBlocks(TenantKey("a", 3), std::nullopt, blocks,
                                   {.tenant = "a"})
                  .ok());
  EXPECT_FALSE(has(TenantKey("a", 2)));
  EXPECT_TRUE(has(TenantKey("a", 3)));
  EXPECT_TRUE(has(TenantKey("b", 1)));
  EXPECT_EQ(store_->Stats().evictions, 2);

  // A state larger than the budget is refused, naming the tenant.
  const absl::Status refused = store_->PutState(
      TenantKey("a", 4), std::string(2 << 20, 'x'), {.tenant = "a"});
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(std::string(refused.message()).find("tenant \"a\""),
            std::string::npos)
      << refused;
  EXPECT_NE(std::string(refused.message()).find("--tenant_state_budget_bytes"),
            std::string::npos);
  EXPECT_TRUE(has(TenantKey("a", 3)));
}

// Runs only as a worker process spawned by the test above.
TEST(StoreRoleWorker, ReadWriteLoop) {
  const char* address = std::getenv(kWorkerEnv);
  const char* writer = std::getenv("TWICE_STORE_ROLE_WRITER");
  if (address == nullptr || writer == nullptr) {
    GTEST_SKIP() << "a worker of StoreRoleTest, not a test on its own";
  }
  std::unique_ptr<RemoteStateStore> store = Connect(address);
  EXPECT_EQ(ReadWriteLoop(*store, std::atoi(writer), 40), 0);
}

}  // namespace
}  // namespace twice::services
