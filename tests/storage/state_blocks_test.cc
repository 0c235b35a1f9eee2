// Chunked (chunk-KV) states as append-only blocks, with synthetic blocks:
// an append writes only its new blocks, reads assemble and verify them.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "storage/block_manifest.h"
#include "storage/rocksdb_state_store.h"
#include "tests/storage/raw_db.h"
#include "tests/storage/store_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

using test_util::Key;
using test_util::RandomBytes;
using test_util::Record;

class StateBlocksTest : public test_util::StoreFixture {
 protected:
  // Blocks above kStateMinBlobBytes land in blob files, like real chunks.
  std::vector<std::string> Blocks(int first, int count, size_t bytes) {
    std::vector<std::string> blocks;
    for (int i = first; i < first + count; ++i) {
      blocks.push_back(RandomBytes(bytes, 100 + i));
    }
    return blocks;
  }
  absl::Status PutBlocks(const StateKey& key, std::optional<StateKey> base,
                         const std::vector<std::string>& blocks,
                         int64_t recompute_tokens = 100) {
    std::vector<std::string_view> views(blocks.begin(), blocks.end());
    return store().PutStateBlocks(key, base, views,
                                  {.recompute_tokens = recompute_tokens});
  }
  static std::string Concat(const std::vector<std::string>& blocks) {
    std::string out;
    for (const std::string& block : blocks) out += block;
    return out;
  }
};

TEST_F(StateBlocksTest, AppendWritesOnlyNewBlocksAndReadsAssemble) {
  Open();
  const std::vector<std::string> first = Blocks(0, 3, 100 << 10);
  ASSERT_OK(PutBlocks(Key(1), std::nullopt, first));
  const StoreStats after_first = store().Stats();
  EXPECT_EQ(after_first.state_count, 1);
  EXPECT_EQ(after_first.block_count, 3);

  const std::vector<std::string> more = Blocks(3, 1, 100 << 10);
  ASSERT_OK(PutBlocks(Key(2), Key(1), more));
  const StoreStats after_append = store().Stats();
  EXPECT_EQ(after_append.state_count, 2);
  EXPECT_EQ(after_append.block_count, 4);  // one new block, not four
  // The append grew the store by one block value and a small manifest.
  EXPECT_LT(after_append.state_bytes - after_first.state_bytes,
            (100 << 10) + 1024);

  std::vector<std::string> all = first;
  all.push_back(more[0]);
  absl::StatusOr<std::vector<std::string>> blocks =
      store().GetStateBlocks(Key(2));
  ASSERT_OK(blocks);
  EXPECT_TRUE(*blocks == all);
  absl::StatusOr<std::string> whole = store().GetState(Key(2));
  ASSERT_OK(whole);
  EXPECT_TRUE(*whole == Concat(all));
  absl::StatusOr<std::string> base = store().GetState(Key(1));
  ASSERT_OK(base);
  EXPECT_TRUE(*base == Concat(first));
  EXPECT_TRUE(Has(Key(1)) && Has(Key(2)));

  // A whole state reads as one block.
  ASSERT_OK(store().PutState(Key(3), "whole", {}));
  blocks = store().GetStateBlocks(Key(3));
  ASSERT_OK(blocks);
  EXPECT_EQ(*blocks, std::vector<std::string>{"whole"});
  const int64_t bytes_before_close = store().Stats().state_bytes;

  Close();
  {
    test_util::RawDb raw(Options().path);
    std::string value;
    EXPECT_TRUE(
        raw.Get(kStatesFamily, BlockKey(Key(2), 3).Bytes(), &value).ok());
    // The base's blocks were not copied under the new state's keys.
    EXPECT_TRUE(raw.Get(kStatesFamily, BlockKey(Key(2), 0).Bytes(), &value)
                    .IsNotFound());
  }
  Open();
  EXPECT_EQ(store().Stats().block_count, 4);
  EXPECT_EQ(store().Stats().state_bytes, bytes_before_close);
  whole = store().GetState(Key(2));
  ASSERT_OK(whole);
  EXPECT_TRUE(*whole == Concat(all));
}

TEST_F(StateBlocksTest, BaseMustBeAStoredChunkedState) {
  Open();
  EXPECT_EQ(PutBlocks(Key(2), Key(1), Blocks(0, 1, 10)).code(),
            absl::StatusCode::kNotFound);
  ASSERT_OK(store().PutState(Key(1), "whole", {}));
  EXPECT_EQ(PutBlocks(Key(2), Key(1), Blocks(0, 1, 10)).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(PutBlocks(Key(1), Key(1), Blocks(0, 1, 10)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StateBlocksTest, CorruptBlockMakesEveryStateUsingItAMiss) {
  Open();
  ASSERT_OK(PutBlocks(Key(1), std::nullopt, Blocks(0, 2, 1000)));
  ASSERT_OK(PutBlocks(Key(2), Key(1), Blocks(2, 1, 1000)));
  Close();
  {
    test_util::RawDb raw(Options().path);
    const std::string key(BlockKey(Key(1), 0).Bytes());
    std::string value;
    ASSERT_OK(raw.Get(kStatesFamily, key, &value));
    value[value.size() / 2] ^= 0x20;
    ASSERT_OK(raw.Put(kStatesFamily, key, value));
  }
  Open();
  absl::StatusOr<std::vector<std::string>> got = store().GetStateBlocks(Key(2));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("block 0"), std::string::npos)
      << got.status();
  EXPECT_EQ(store().Stats().corruptions, 1);
  EXPECT_FALSE(Has(Key(2)));
  // Key(1) lost the same block: not served, a plain miss now.
  EXPECT_FALSE(Has(Key(1)));
  EXPECT_EQ(store().GetState(Key(1)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store().Stats().corruptions, 1);
  EXPECT_EQ(store().Stats().state_count, 0);
  EXPECT_EQ(store().Stats().block_count, 0);
}

TEST_F(StateBlocksTest, BlockReplacedUnderItsKeyIsCaughtByTheManifest) {
  Open();
  ASSERT_OK(PutBlocks(Key(1), std::nullopt, Blocks(0, 2, 1000)));
  Close();
  {
    // A valid state value with other bytes: only the manifest's per-block
    // checksum can tell.
    test_util::RawDb raw(Options().path);
    ASSERT_TRUE(raw.Put(kStatesFamily, BlockKey(Key(1), 1).Bytes(),
                        EncodeStateValue(RandomBytes(1000, 9), 100, 1))
                    .ok());
  }
  Open();
  absl::StatusOr<std::string> got = store().GetState(Key(1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store().Stats().corruptions, 1);
}

TEST_F(StateBlocksTest, DeletingAStateKeepsBlocksOthersStillName) {
  Open();
  ASSERT_OK(PutBlocks(Key(1), std::nullopt, Blocks(0, 2, 1000)));
  ASSERT_OK(PutBlocks(Key(2), Key(1), Blocks(2, 2, 1000)));
  ASSERT_OK(store().DeleteState(Key(2)));
  EXPECT_EQ(store().Stats().block_count, 2);
  EXPECT_TRUE(Has(Key(1)));
  ASSERT_OK(store().DeleteState(Key(1)));
  EXPECT_EQ(store().Stats().block_count, 0);
  EXPECT_EQ(store().Stats().state_bytes, 0);

  // DeleteDocument takes a chunked state's own blocks along.
  ASSERT_OK(PutBlocks(Key(3), std::nullopt, Blocks(0, 2, 1000)));
  PutDoc(Record("t", "d", {Key(3)}));
  absl::StatusOr<int64_t> deleted = store().DeleteDocument({"t", "d"});
  ASSERT_OK(deleted);
  EXPECT_EQ(*deleted, 1);
  EXPECT_EQ(store().Stats().block_count, 0);
  EXPECT_EQ(store().Stats().state_bytes, 0);
}

TEST_F(StateBlocksTest, EvictionTakesBlocksAlongButSparesPinnedStates) {
  RocksDbStoreOptions options = Options();
  options.state_budget_bytes = 40000;
  Open(options);
  ASSERT_OK(PutBlocks(Key(1), std::nullopt, Blocks(0, 3, 4000), 1));
  PutDoc(Record("t", "pinned", {Key(1)}, true));
  for (int i = 10; i < 20; ++i) {
    ASSERT_TRUE(
        PutBlocks(Key(i), std::nullopt, Blocks(i * 10, 2, 4000), 500).ok());
    EXPECT_LE(store().Stats().state_bytes, options.state_budget_bytes);
  }
  EXPECT_GT(store().Stats().evictions, 0);
  absl::StatusOr<std::string> pinned = store().GetState(Key(1));
  ASSERT_OK(pinned);
  EXPECT_EQ(pinned->size(), 12000u);
}

}  // namespace
}  // namespace twice::storage
