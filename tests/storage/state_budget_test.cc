// The byte budget: eviction by recompute cost per byte and recency, pins,
// and the accounting that backs both, against a real RocksDB.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "storage/rocksdb_state_store.h"
#include "tests/storage/raw_db.h"
#include "tests/storage/store_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

using test_util::Key;
using test_util::RandomBytes;
using test_util::Record;

constexpr int64_t kBlob = 4000;
// A state value: the blob, its 16-byte header and the 24-byte envelope.
constexpr int64_t kStored = kBlob + 16 + 24;

class StateBudgetTest : public test_util::StoreFixture {
 protected:
  RocksDbStoreOptions Options() const override {
    RocksDbStoreOptions options = StoreFixture::Options();
    // Room for three states; the eviction slack (budget / 32) is far less
    // than one state, so each put over budget evicts exactly one.
    options.state_budget_bytes = 3 * kStored + kStored / 2;
    options.eviction_cost_weight = cost_weight_;
    return options;
  }
  void Put(int i, int64_t recompute_tokens) {
    ASSERT_TRUE(store()
                    .PutState(Key(i), RandomBytes(kBlob, i),
                              {.recompute_tokens = recompute_tokens})
                    .ok());
    EXPECT_LE(store().Stats().state_bytes, Options().state_budget_bytes);
  }

  double cost_weight_ = 1.0;
};

TEST_F(StateBudgetTest, CheapStatePerByteGoesBeforeAnOlderCostlyOne) {
  Open();
  Put(1, 1000);  // oldest, costly
  Put(2, 10);    // cheap to recompute
  Put(3, 1000);
  Put(4, 1000);  // over budget: one must go
  EXPECT_TRUE(Has(Key(1)));
  EXPECT_FALSE(Has(Key(2)));
  EXPECT_TRUE(Has(Key(3)));
  EXPECT_TRUE(Has(Key(4)));
  const StoreStats stats = store().Stats();
  EXPECT_EQ(stats.evictions, 1);
  EXPECT_EQ(stats.evicted_bytes, kStored);
  EXPECT_EQ(stats.state_count, 3);
  EXPECT_EQ(stats.budget_bytes, Options().state_budget_bytes);
  EXPECT_EQ(store().GetState(Key(2)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(StateBudgetTest, CostWeightZeroIsLeastRecentlyUsed) {
  cost_weight_ = 0;
  Open();
  Put(1, 1000);
  Put(2, 10);
  Put(3, 1000);
  ASSERT_TRUE(store().GetState(Key(1)).ok());  // 1 is now the newest
  Put(4, 1000);
  EXPECT_TRUE(Has(Key(1)));
  EXPECT_FALSE(Has(Key(2)));
  Put(5, 1000);
  EXPECT_FALSE(Has(Key(3)));
  EXPECT_TRUE(Has(Key(1)));
}

TEST_F(StateBudgetTest, FlopsPerTokenScalesTheCost) {
  Open();
  // Same tokens, but state 2 came from a model ten times costlier per token.
  ASSERT_TRUE(store()
                  .PutState(Key(1), RandomBytes(kBlob, 1),
                            {.recompute_tokens = 100, .flops_per_token = 1e9})
                  .ok());
  ASSERT_TRUE(store()
                  .PutState(Key(2), RandomBytes(kBlob, 2),
                            {.recompute_tokens = 100, .flops_per_token = 1e10})
                  .ok());
  Put(3, 1000);
  Put(4, 1000);
  EXPECT_FALSE(Has(Key(1)));
  EXPECT_TRUE(Has(Key(2)));
}

TEST_F(StateBudgetTest, PinnedStatesStayWhateverTheirScore) {
  Open();
  Put(1, 1);  // the cheapest and oldest of all
  test_util::StoreFixture::PutDoc(Record("t", "pinned", {Key(1)}, true));
  EXPECT_EQ(store().Stats().pinned_state_count, 1);
  for (int i = 10; i < 30; ++i) Put(i, 1000);
  EXPECT_TRUE(Has(Key(1)));
  EXPECT_EQ(store().Stats().evictions, 20 - 2);

  // Unpinned, it is the first to go.
  ASSERT_OK(store().UpdateDocument(
      test_util::AtStoredRevision(store(), Record("t", "pinned", {Key(1)}))));
  EXPECT_EQ(store().Stats().pinned_state_count, 0);
  Put(30, 1000);
  EXPECT_FALSE(Has(Key(1)));
}

TEST_F(StateBudgetTest, PinsSurviveReopen) {
  Open();
  Put(1, 1);
  test_util::StoreFixture::PutDoc(Record("t", "pinned", {Key(1)}, true));
  Close();
  Open();
  EXPECT_EQ(store().Stats().pinned_state_count, 1);
  for (int i = 10; i < 20; ++i) Put(i, 1000);
  EXPECT_TRUE(Has(Key(1)));
}

TEST_F(StateBudgetTest, OnlyPinnedStatesLeftHoldTheStoreAboveBudget) {
  Open();
  for (int i = 1; i <= 3; ++i) Put(i, 1);
  test_util::StoreFixture::PutDoc(
      Record("t", "pinned", {Key(1), Key(2), Key(3)}, true));
  // Nothing is evictable: the put succeeds, the store goes over budget by
  // what is pinned, and the pinned states stay.
  ASSERT_OK(store().PutState(Key(4), RandomBytes(kBlob, 4), {}));
  EXPECT_TRUE(Has(Key(1)) && Has(Key(2)) && Has(Key(3)) && Has(Key(4)));
  EXPECT_EQ(store().Stats().evictions, 0);
  // The next put evicts the unpinned one instead.
  ASSERT_OK(store().PutState(Key(5), RandomBytes(kBlob, 5), {}));
  EXPECT_FALSE(Has(Key(4)));
  EXPECT_TRUE(Has(Key(1)));
}

TEST_F(StateBudgetTest, RecordsMayNameEvictedStates) {
  Open();
  Put(1, 10);
  test_util::StoreFixture::PutDoc(Record("t", "d", {Key(1)}));
  for (int i = 10; i < 14; ++i) Put(i, 1000);
  EXPECT_FALSE(Has(Key(1)));  // a cache: the record stays, the state went
  absl::StatusOr<DocumentRecord> record = store().GetDocument({"t", "d"});
  ASSERT_OK(record);
  absl::StatusOr<int64_t> deleted = store().DeleteDocument({"t", "d"});
  ASSERT_OK(deleted);
  EXPECT_EQ(*deleted, 0);
}

TEST_F(StateBudgetTest, ConcurrentWritersAndReadersStayWithinBudget) {
  // Values carry their own identity, so a reader can tell a torn or mixed
  // value from a whole one.
  auto value_of = [](int key, int version) {
    std::string blob = RandomBytes(kBlob, key * 1000 + version);
    std::memcpy(blob.data(), &key, sizeof(key));
    std::memcpy(blob.data() + sizeof(key), &version, sizeof(version));
    return blob;
  };
  Open();
  const int64_t budget = Options().state_budget_bytes;
  std::atomic<bool> failed{false};
  std::atomic<int> over_budget{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 60; ++i) {
        const int key = (i * 3 + t) % 12;
        if (!store()
                 .PutState(Key(key), value_of(key, i),
                           {.recompute_tokens = 10 + key})
                 .ok()) {
          failed = true;
        }
        if (store().Stats().state_bytes > budget) over_budget += 1;
      }
    });
  }
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 300; ++i) {
        const int key = i % 12;
        absl::StatusOr<std::string> got = store().GetState(Key(key));
        if (!got.ok()) {
          if (got.status().code() != absl::StatusCode::kNotFound) failed = true;
          continue;
        }
        int stored_key = -1;
        int version = -1;
        std::memcpy(&stored_key, got->data(), sizeof(stored_key));
        std::memcpy(&version, got->data() + sizeof(stored_key),
                    sizeof(version));
        if (stored_key != key || *got != value_of(key, version)) failed = true;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_FALSE(failed.load());
  EXPECT_EQ(over_budget.load(), 0);
  const StoreStats before = store().Stats();
  EXPECT_LE(before.state_bytes, budget);
  EXPECT_GT(before.evictions, 0);
  Close();
  Open();
  EXPECT_EQ(store().Stats().state_bytes, before.state_bytes);
  EXPECT_EQ(store().Stats().state_count, before.state_count);
}

TEST_F(StateBudgetTest, RefsAreRebuiltForAStoreWrittenWithoutThem) {
  Open();
  Put(1, 1);
  Put(2, 1);
  test_util::StoreFixture::PutDoc(Record("t", "pinned", {Key(1)}, true));
  test_util::StoreFixture::PutDoc(Record("t", "plain", {Key(2)}));
  Close();
  {
    // As a store from before the refs family existed.
    test_util::RawDb raw(Options().path);
    for (const std::string& key : raw.Keys(kRefsFamily)) {
      ASSERT_OK(raw.Delete(kRefsFamily, key));
    }
  }
  Open();
  EXPECT_EQ(store().Stats().pinned_state_count, 1);
  for (int i = 10; i < 16; ++i) Put(i, 1000);
  EXPECT_TRUE(Has(Key(1)));
  absl::StatusOr<int64_t> deleted = store().DeleteDocument({"t", "pinned"});
  ASSERT_OK(deleted);
  EXPECT_EQ(*deleted, 1);
}

TEST_F(StateBudgetTest, DiscardedCorruptStateIsCountedAsCorruptAndMiss) {
  Open();
  Put(1, 1);
  ASSERT_OK(store().GetState(Key(1)));
  ASSERT_OK(store().DiscardCorruptState(Key(1)));
  const StoreStats stats = store().Stats();
  EXPECT_EQ(stats.corruptions, 1);
  EXPECT_EQ(stats.hits, 0);
  EXPECT_EQ(stats.misses, 1);
  EXPECT_FALSE(Has(Key(1)));
  EXPECT_EQ(stats.state_count, 0);
}

TEST_F(StateBudgetTest, InvalidBudgetOptions) {
  RocksDbStoreOptions options = Options();
  options.state_budget_bytes = -1;
  EXPECT_EQ(RocksDbStateStore::Open(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = Options();
  options.eviction_cost_weight = -1;
  EXPECT_EQ(RocksDbStateStore::Open(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::storage
