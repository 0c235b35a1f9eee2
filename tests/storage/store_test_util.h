// Shared helpers of the store tests: keys, records, token lists and a
// fixture owning a RocksDbStateStore in a temporary directory.
#ifndef TWICE_TESTS_STORAGE_STORE_TEST_UTIL_H_
#define TWICE_TESTS_STORAGE_STORE_TEST_UTIL_H_

#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "storage/rocksdb_state_store.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace twice::storage::test_util {

inline StateKey Key(int i) {
  return ChainKey(RootKey("fp", "recurrent", "t"), std::vector<int32_t>{i});
}

inline std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (size_t i = n - n % 8; i < n; ++i) out[i] = static_cast<char>(rng());
  return out;
}

// `record` as the next write of its document: at the revision the store
// holds now (0 when it holds none), so the conditional write commits.
inline DocumentRecord AtStoredRevision(Store& store, DocumentRecord record) {
  absl::StatusOr<DocumentRecord> stored = store.GetDocument(RefOf(record));
  record.revision = stored.ok() ? stored->revision : 0;
  return record;
}

inline std::vector<int32_t> Tokens(int64_t n) {
  std::vector<int32_t> tokens(n);
  for (int64_t i = 0; i < n; ++i) tokens[i] = static_cast<int32_t>(i * 7);
  return tokens;
}

// A record of `keys.size()` segments of 10 tokens each.
inline DocumentRecord Record(std::string tenant, std::string id,
                             const std::vector<StateKey>& keys,
                             bool pinned = false) {
  DocumentRecord record;
  record.tenant = std::move(tenant);
  record.document_id = std::move(id);
  record.model = "m";
  record.model_fingerprint = "fp";
  record.token_count =
      10 * static_cast<int64_t>(std::max<size_t>(keys.size(), 1));
  record.segment_tokens = 10;
  for (size_t i = 0; i < keys.size(); ++i) {
    record.segments.push_back({static_cast<int64_t>(10 * (i + 1)), keys[i]});
  }
  record.pinned = pinned;
  record.created_unix_ms = 1;
  record.accessed_unix_ms = 2;
  return record;
}

// Runs write(0) .. write(writers - 1) at once, all made from one revision,
// and returns the index of the one that committed. Fails the test (and
// returns -1) unless exactly one did and every other was ABORTED.
inline int RaceWritersFromOneRevision(
    int writers, const std::function<absl::Status(int)>& write) {
  std::vector<absl::Status> results(writers);
  std::vector<std::thread> threads;
  for (int i = 0; i < writers; ++i) {
    threads.emplace_back([&, i] { results[i] = write(i); });
  }
  for (std::thread& thread : threads) thread.join();
  int committed = -1;
  for (int i = 0; i < writers; ++i) {
    if (results[i].ok()) {
      EXPECT_EQ(committed, -1) << "two writers committed from one revision";
      committed = i;
    } else {
      EXPECT_EQ(results[i].code(), absl::StatusCode::kAborted) << results[i];
    }
  }
  EXPECT_NE(committed, -1) << "no writer committed";
  return committed;
}

class StoreFixture : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }

  virtual RocksDbStoreOptions Options() const {
    RocksDbStoreOptions options;
    options.path = dir_.path() + "/db";
    // Tests write a lot; syncing each write would dominate their run time.
    options.sync_writes = false;
    return options;
  }
  void Open(const RocksDbStoreOptions& options) {
    absl::StatusOr<std::unique_ptr<RocksDbStateStore>> store =
        RocksDbStateStore::Open(options);
    ASSERT_OK(store);
    store_ = std::move(*store);
  }
  void Open() { Open(Options()); }
  void Close() { store_.reset(); }
  RocksDbStateStore& store() { return *store_; }

  void PutDoc(const DocumentRecord& record) {
    ASSERT_OK(store().PutDocument(AtStoredRevision(store(), record),
                                  Tokens(record.token_count)));
  }
  bool Has(const StateKey& key) {
    absl::StatusOr<bool> has = store().HasState(key);
    EXPECT_OK(has);
    return has.ok() && *has;
  }

  testing::TempDir dir_;
  std::unique_ptr<RocksDbStateStore> store_;
};

}  // namespace twice::storage::test_util

#endif  // TWICE_TESTS_STORAGE_STORE_TEST_UTIL_H_
