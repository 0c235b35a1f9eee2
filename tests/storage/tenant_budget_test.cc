// The per-tenant byte budget (tenant_state_budget_bytes) against a real
// RocksDB: a tenant's puts evict only its own states, fail when those cannot
// make room, and the tenant totals behind both survive a reopen.
#include <atomic>
#include <bit>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "storage/blob_envelope.h"
#include "storage/byte_io.h"
#include "storage/record_validation.h"
#include "storage/rocksdb_state_store.h"
#include "tests/storage/raw_db.h"
#include "tests/storage/store_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

using test_util::RandomBytes;
using test_util::Record;

constexpr int64_t kBudgetBlob = 4000;
// A state value: the blob, its 16-byte header and the 24-byte envelope.
constexpr int64_t kBudgetStored = kBudgetBlob + 16 + 24;
// Room for three states of a tenant; the eviction slack (budget / 32) is far
// less than one state, so each put over budget evicts exactly one.
constexpr int64_t kTenantBudget = 3 * kBudgetStored + kBudgetStored / 2;

// A manifest of `blocks` blocks: envelope, header and 48 bytes per block.
constexpr int64_t ManifestBytes(int64_t blocks) {
  return 24 + 20 + 48 * blocks;
}

// Keys are tenant-scoped: the tenant is part of the chain root.
StateKey KeyOf(const std::string& tenant, int i) {
  return ChainKey(RootKey("fp", "recurrent", tenant), std::vector<int32_t>{i});
}

class TenantBudgetTest : public test_util::StoreFixture {
 protected:
  RocksDbStoreOptions Options() const override {
    RocksDbStoreOptions options = StoreFixture::Options();
    options.tenant_state_budget_bytes = kTenantBudget;
    options.state_budget_bytes = state_budget_;
    return options;
  }
  absl::Status TryPut(const std::string& tenant, int i, int64_t blob_bytes,
                      int64_t recompute_tokens = 1000) {
    return store().PutState(
        KeyOf(tenant, i), RandomBytes(blob_bytes, i),
        {.recompute_tokens = recompute_tokens, .tenant = tenant});
  }
  void Put(const std::string& tenant, int i, int64_t recompute_tokens = 1000) {
    const absl::Status s = TryPut(tenant, i, kBudgetBlob, recompute_tokens);
    ASSERT_OK(s);
    EXPECT_LE(store().TenantStateBytes(tenant), kTenantBudget);
  }
  bool Has(const std::string& tenant, int i) {
    return StoreFixture::Has(KeyOf(tenant, i));
  }
  int64_t Bytes(const std::string& tenant) {
    return store().TenantStateBytes(tenant);
  }

  int64_t state_budget_ = 0;
};

TEST_F(TenantBudgetTest, PutOverItsBudgetEvictsOnlyTheTenantsOwnStates) {
  Open();
  Put("b", 1, 1);  // older and cheaper than any of a's
  Put("b", 2, 1);
  Put("a", 1, 10);  // a's cheapest
  Put("a", 2);
  Put("a", 3);
  EXPECT_EQ(Bytes("a"), 3 * kBudgetStored);
  Put("a", 4);
  EXPECT_FALSE(Has("a", 1));
  EXPECT_TRUE(Has("a", 2) && Has("a", 3) && Has("a", 4));
  EXPECT_TRUE(Has("b", 1) && Has("b", 2));
  EXPECT_EQ(store().Stats().evictions, 1);
  EXPECT_EQ(Bytes("a"), 3 * kBudgetStored);
  EXPECT_EQ(Bytes("b"), 2 * kBudgetStored);
  for (int i = 5; i < 15; ++i) Put("a", i);
  EXPECT_TRUE(Has("b", 1) && Has("b", 2));
  EXPECT_TRUE(Has("a", 12) && Has("a", 13) && Has("a", 14));
  EXPECT_EQ(store().Stats().state_bytes, 5 * kBudgetStored);
}

TEST_F(TenantBudgetTest, BudgetsWithinTheStoreBudgetKeepOtherTenantsStates) {
  // Two tenants' budgets add up to the store's: the store budget alone
  // would evict b's oldest states for a's puts.
  state_budget_ = 2 * kTenantBudget;
  Open();
  for (int i = 1; i <= 3; ++i) Put("b", i, 1);
  for (int i = 1; i <= 13; ++i) Put("a", i);
  EXPECT_TRUE(Has("b", 1) && Has("b", 2) && Has("b", 3));
  EXPECT_EQ(Bytes("b"), 3 * kBudgetStored);
  EXPECT_EQ(Bytes("a"), 3 * kBudgetStored);
  EXPECT_LE(store().Stats().state_bytes, state_budget_);
  EXPECT_EQ(store().Stats().evictions, 10);
}

TEST_F(TenantBudgetTest, PinnedStatesFillingTheBudgetAnswerResourceExhausted) {
  Open();
  for (int i = 1; i <= 3; ++i) Put("a", i);
  PutDoc(Record("a", "pinned", {KeyOf("a", 1), KeyOf("a", 2), KeyOf("a", 3)},
                true));
  const absl::Status s = TryPut("a", 4, kBudgetBlob);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  const std::string message(s.message());
  EXPECT_NE(message.find("tenant \"a\""), std::string::npos) << message;
  EXPECT_NE(message.find("--tenant_state_budget_bytes"), std::string::npos);
  EXPECT_NE(message.find(std::to_string(kTenantBudget)), std::string::npos);
  EXPECT_NE(message.find(std::to_string(3 * kBudgetStored)), std::string::npos);
  EXPECT_FALSE(Has("a", 4));
  EXPECT_TRUE(Has("a", 1) && Has("a", 2) && Has("a", 3));
  EXPECT_EQ(store().Stats().evictions, 0);
  EXPECT_EQ(Bytes("a"), 3 * kBudgetStored);
  // Another tenant is not held up by a's pins.
  Put("b", 1);

  // Unpinned, a's states make room again: the failed put reserved nothing.
  ASSERT_OK(store().UpdateDocument(test_util::AtStoredRevision(
      store(),
      Record("a", "pinned", {KeyOf("a", 1), KeyOf("a", 2), KeyOf("a", 3)}))));
  Put("a", 4);
  EXPECT_EQ(store().Stats().evictions, 1);
  EXPECT_TRUE(Has("b", 1));
}

TEST_F(TenantBudgetTest, PutThatCannotFitEvictsNothing) {
  Open();
  for (int i = 1; i <= 3; ++i) Put("a", i);
  PutDoc(Record("a", "pinned", {KeyOf("a", 1), KeyOf("a", 2)}, true));
  // Two states' worth: evicting a's one unpinned state would not do.
  absl::Status s = TryPut("a", 4, 2 * kBudgetBlob);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(Has("a", 3));
  // A state larger than the whole budget never fits.
  s = TryPut("a", 5, 4 * kBudgetBlob);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(std::string(s.message()).find("tenant \"a\""), std::string::npos);
  EXPECT_TRUE(Has("a", 3));
  EXPECT_EQ(store().Stats().evictions, 0);
  // One state's worth fits by evicting the unpinned one.
  Put("a", 6);
  EXPECT_FALSE(Has("a", 3));
  EXPECT_TRUE(Has("a", 1) && Has("a", 2) && Has("a", 6));
}

TEST_F(TenantBudgetTest, TenantTotalsSurviveReopen) {
  Open();
  for (int i = 1; i <= 3; ++i) Put("a", i);
  Put("b", 1, 1);
  Close();
  Open();
  EXPECT_EQ(Bytes("a"), 3 * kBudgetStored);
  EXPECT_EQ(Bytes("b"), kBudgetStored);
  // One of a's goes (which one depends on write times, which may tie).
  Put("a", 4);
  int kept = 0;
  for (int i = 1; i <= 4; ++i) kept += Has("a", i) ? 1 : 0;
  EXPECT_EQ(kept, 3);
  EXPECT_EQ(store().Stats().evictions, 1);
  EXPECT_TRUE(Has("b", 1));
}

TEST_F(TenantBudgetTest, IndexEntriesWithoutATenantLoadAsNoTenants) {
  Open();
  Put("a", 1);
  Close();
  {
    // As a store written before tenant budgets: the second index layout.
    test_util::RawDb raw(Options().path);
    std::string value;
    ASSERT_OK(raw.Get(kStateIndexFamily, KeyOf("a", 1).Bytes(), &value));
    absl::StatusOr<StateIndexEntry> entry = DecodeStateIndex(value);
    ASSERT_OK(entry);
    ASSERT_EQ(entry->tenant, "a");
    std::string payload;
    AppendI64(payload, entry->stored_bytes);
    AppendI64(payload, entry->recompute_tokens);
    AppendI64(payload, entry->written_unix_ms);
    AppendU64(payload, std::bit_cast<uint64_t>(entry->flops_per_token));
    AppendU8(payload, static_cast<uint8_t>(entry->form));
    const std::string_view parts[] = {payload};
    ASSERT_TRUE(raw.Put(kStateIndexFamily, KeyOf("a", 1).Bytes(),
                        SealEnvelope(BlobKind::kStateIndex, parts))
                    .ok());
  }
  Open();
  EXPECT_TRUE(Has("a", 1));
  EXPECT_EQ(store().Stats().corruptions, 0);
  EXPECT_EQ(store().Stats().state_bytes, kBudgetStored);
  EXPECT_EQ(Bytes("a"), 0);
  // Outside a's budget: a's own puts neither count it nor evict it.
  for (int i = 2; i <= 6; ++i) Put("a", i);
  EXPECT_TRUE(Has("a", 1));
  EXPECT_EQ(Bytes("a"), 3 * kBudgetStored);
}

TEST_F(TenantBudgetTest, ChunkedStatesCountTheirBlocksAndManifests) {
  Open();
  const std::string block0 = RandomBytes(kBudgetBlob, 100);
  const std::string block1 = RandomBytes(kBudgetBlob, 101);
  const std::string block2 = RandomBytes(kBudgetBlob, 102);
  const std::vector<std::string_view> first = {block0, block1};
  ASSERT_TRUE(store()
                  .PutStateBlocks(KeyOf("a", 1), std::nullopt, first,
                                  {.recompute_tokens = 10, .tenant = "a"})
                  .ok());
  EXPECT_EQ(Bytes("a"), 2 * kBudgetStored + ManifestBytes(2));
  // An extension counts only its new block and its manifest.
  const std::vector<std::string_view> next = {block2};
  ASSERT_TRUE(store()
                  .PutStateBlocks(KeyOf("a", 2), KeyOf("a", 1), next,
                                  {.recompute_tokens = 20, .tenant = "a"})
                  .ok());
  const int64_t chain = 3 * kBudgetStored + ManifestBytes(2) + ManifestBytes(3);
  EXPECT_EQ(Bytes("a"), chain);
  EXPECT_EQ(store().Stats().state_bytes, chain);
  Put("b", 1, 1);

  // Two states' worth: more than either manifest frees alone (they share
  // blocks), so room comes from evicting the chain whole.
  const absl::Status s = TryPut("a", 3, 2 * kBudgetBlob);
  ASSERT_OK(s);
  EXPECT_FALSE(Has("a", 1) || Has("a", 2));
  EXPECT_EQ(store().Stats().block_count, 0);
  EXPECT_EQ(Bytes("a"), 2 * kBudgetBlob + 40);
  EXPECT_TRUE(Has("b", 1));
  EXPECT_EQ(store().Stats().state_bytes, Bytes("a") + Bytes("b"));

  // Blocks that alone exceed the budget are refused, naming the tenant.
  std::vector<std::string> big;
  for (int i = 0; i < 4; ++i) big.push_back(RandomBytes(kBudgetBlob, 200 + i));
  const std::vector<std::string_view> views(big.begin(), big.end());
  const absl::Status refused = store().PutStateBlocks(
      KeyOf("a", 4), std::nullopt, views, {.tenant = "a"});
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(std::string(refused.message()).find("tenant \"a\""),
            std::string::npos);
  EXPECT_TRUE(Has("a", 3));
}

TEST_F(TenantBudgetTest, ConcurrentPutsOfOneTenantNeverShareRoom) {
  Open();
  Put("b", 1, 1);
  std::atomic<bool> failed{false};
  std::atomic<int> over_budget{0};
  std::vector<std::thread> threads;
  // Three at once: the other two in flight and this one make three states,
  // within the budget, so a put always fits by evicting and none may fail.
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 60; ++i) {
        const absl::Status s = TryPut("a", 1000 * t + i, kBudgetBlob);
        if (!s.ok()) failed = true;
        if (Bytes("a") > kTenantBudget) over_budget += 1;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_FALSE(failed.load());
  EXPECT_EQ(over_budget.load(), 0);
  EXPECT_LE(Bytes("a"), kTenantBudget);
  EXPECT_TRUE(Has("b", 1));
  EXPECT_EQ(store().Stats().state_bytes, Bytes("a") + Bytes("b"));
}

TEST_F(TenantBudgetTest, StatesOfNoTenantAreOutsideTenantBudgets) {
  Open();
  for (int i = 1; i <= 8; ++i) {
    ASSERT_TRUE(store()
                    .PutState(KeyOf("x", i), RandomBytes(kBudgetBlob, i),
                              {.recompute_tokens = 1})
                    .ok());
  }
  EXPECT_EQ(store().Stats().evictions, 0);
  EXPECT_EQ(Bytes(""), 0);
  EXPECT_EQ(Bytes("x"), 0);
  EXPECT_EQ(store().Stats().state_bytes, 8 * kBudgetStored);
}

TEST_F(TenantBudgetTest, InvalidOptionAndTenantsAreRefused) {
  RocksDbStoreOptions options = Options();
  options.tenant_state_budget_bytes = -1;
  EXPECT_EQ(RocksDbStateStore::Open(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  Open();
  const std::string nul("a\0b", 3);
  const std::string too_long(kMaxRecordFieldBytes + 1, 'a');
  for (const std::string& tenant : {nul, too_long}) {
    EXPECT_EQ(store().PutState(KeyOf("a", 1), "x", {.tenant = tenant}).code(),
              absl::StatusCode::kInvalidArgument);
    const std::vector<std::string_view> blocks = {"x"};
    EXPECT_EQ(store()
                  .PutStateBlocks(KeyOf("a", 1), std::nullopt, blocks,
                                  {.tenant = tenant})
                  .code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(store().Stats().state_count, 0);
}

}  // namespace
}  // namespace twice::storage
