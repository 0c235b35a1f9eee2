// RadosStateStore against the real local Ceph cluster of ctest's
// ceph_cluster fixture (TWICE_CEPH_CONF; rados_objects_test.cc has the
// details): whole and chunked states round-trip, puts are idempotent, a
// chunked state that extends another writes only its new blocks, bytes
// overwritten in place (as `rados put` would) are caught by the envelope or
// the manifest, deleted and reported as a miss, and ListStates pages over
// every state once, blocks left out.
#include "storage/rados/rados_state_store.h"

#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "storage/rados/rados_cluster.h"
#include "storage/rados/rados_objects.h"
#include "storage/state_value.h"
#include "tests/ceph/ceph_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

using test_util::ClusterConf;
using test_util::RandomBytes;

class RadosStateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(ClusterConf().empty())
        << "TWICE_CEPH_CONF is not set: run through ctest (fixture "
           "ceph_cluster)";
    RadosOptions options;
    options.conf_file = ClusterConf();
    ASSERT_OK_AND_ASSIGN(cluster_, RadosCluster::Connect(options));
    // A pool per test: listings see only this test's states.
    pool_name_ = "twice-test-states-" + std::to_string(std::random_device{}());
    ASSERT_OK_AND_ASSIGN(store_, RadosStateStore::Open(*cluster_, pool_name_));
    ASSERT_OK_AND_ASSIGN(raw_, cluster_->OpenPool(pool_name_, false));
  }

  StateKey Key(int i) {
    return ChainKey(RootKey("fp", "causal", "t"), {i, seed_});
  }

  const int seed_ = static_cast<int>(std::random_device{}() & 0xffff);
  std::unique_ptr<RadosCluster> cluster_;
  std::string pool_name_;
  std::unique_ptr<RadosStateStore> store_;
  librados::IoCtx raw_;
};

TEST_F(RadosStateStoreTest, WholeStatesRoundTripAndPutsAreIdempotent) {
  const std::string blob = RandomBytes(3 << 20, 1);
  PutStateOptions options;
  options.tenant = "t";
  options.recompute_tokens = 512;
  ASSERT_OK(store_->PutState(Key(1), blob, options));
  ASSERT_OK(store_->PutState(Key(1), blob, options));
  ASSERT_OK_AND_ASSIGN(bool has, store_->HasState(Key(1)));
  EXPECT_TRUE(has);
  ASSERT_OK_AND_ASSIGN(std::string read, store_->GetState(Key(1)));
  EXPECT_TRUE(read == blob);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> blocks,
                       store_->GetStateBlocks(Key(1)));
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_TRUE(blocks[0] == blob);
  ASSERT_OK(store_->DeleteState(Key(1)));
  ASSERT_OK(store_->DeleteState(Key(1)));
  ASSERT_OK_AND_ASSIGN(bool gone, store_->HasState(Key(1)));
  EXPECT_FALSE(gone);
  EXPECT_EQ(store_->GetState(Key(1)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->PutState(Key(2), blob, {.recompute_tokens = -1}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      store_->PutState(Key(2), blob, {.tenant = std::string("a\0b", 3)}).code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_F(RadosStateStoreTest, ChunkedStatesExtendTheirBaseWithNewBlocksOnly) {
  const std::vector<std::string> first = {RandomBytes(1000, 1),
                                          RandomBytes(2000, 2)};
  const std::vector<std::string_view> first_views(first.begin(), first.end());
  ASSERT_OK(store_->PutStateBlocks(Key(10), std::nullopt, first_views, {}));
  const std::vector<std::string> more = {RandomBytes(1500, 3)};
  const std::vector<std::string_view> more_views(more.begin(), more.end());
  ASSERT_OK(store_->PutStateBlocks(Key(11), Key(10), more_views, {}));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> blocks,
                       store_->GetStateBlocks(Key(11)));
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_TRUE(blocks[0] == first[0]);
  EXPECT_TRUE(blocks[1] == first[1]);
  EXPECT_TRUE(blocks[2] == more[0]);
  ASSERT_OK_AND_ASSIGN(std::string whole, store_->GetState(Key(11)));
  EXPECT_TRUE(whole == first[0] + first[1] + more[0]);
  // The extension wrote one block: the base's two are shared.
  ASSERT_OK_AND_ASSIGN(std::optional<uint64_t> shared,
                       StatObject(raw_, BlockObjectName(BlockKey(Key(10), 1))));
  EXPECT_TRUE(shared.has_value());
  ASSERT_OK_AND_ASSIGN(std::optional<uint64_t> unwritten,
                       StatObject(raw_, BlockObjectName(BlockKey(Key(11), 1))));
  EXPECT_FALSE(unwritten.has_value());
  // A base that is missing, or not chunked, is NOT_FOUND.
  EXPECT_EQ(store_->PutStateBlocks(Key(12), Key(99), more_views, {}).code(),
            absl::StatusCode::kNotFound);
  ASSERT_OK(store_->PutState(Key(13), "whole", {}));
  EXPECT_EQ(store_->PutStateBlocks(Key(14), Key(13), more_views, {}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->PutStateBlocks(Key(15), Key(15), more_views, {}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RadosStateStoreTest, ValuesPastThePartSizeAreStripedAndReadWhole) {
  // 1 MiB parts stand in for the cluster's 90 MiB write limit.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RadosStateStore> small,
                       RadosStateStore::Open(*cluster_, pool_name_, 1 << 20));
  const std::string blob = RandomBytes((7 << 19) + 123, 9);  // 3.5 MiB
  ASSERT_OK(small->PutState(Key(30), blob, {}));
  const std::string head = StateObjectName(Key(30));
  for (int i = 1; i <= 3; ++i) {
    ASSERT_OK_AND_ASSIGN(std::optional<uint64_t> part,
                         StatObject(raw_, PartObjectName(head, i)));
    EXPECT_TRUE(part.has_value()) << i;
  }
  ASSERT_OK_AND_ASSIGN(std::optional<uint64_t> beyond,
                       StatObject(raw_, PartObjectName(head, 4)));
  EXPECT_FALSE(beyond.has_value());
  // Read whole by any store on the pool, and one block for GetStateBlocks.
  ASSERT_OK_AND_ASSIGN(std::string whole, store_->GetState(Key(30)));
  EXPECT_TRUE(whole == blob);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> blocks,
                       small->GetStateBlocks(Key(30)));
  ASSERT_EQ(blocks.size(), 1u);
  // A part overwritten: the whole fails its checksum, and every object of
  // the value goes.
  ceph::bufferlist garbage;
  garbage.append(RandomBytes(1 << 20, 10));
  ASSERT_EQ(raw_.write_full(PartObjectName(head, 2), garbage), 0);
  EXPECT_EQ(small->GetState(Key(30)).status().code(),
            absl::StatusCode::kNotFound);
  for (int i = 0; i <= 3; ++i) {
    ASSERT_OK_AND_ASSIGN(
        std::optional<uint64_t> left,
        StatObject(raw_, i == 0 ? head : PartObjectName(head, i)));
    EXPECT_FALSE(left.has_value()) << i;
  }
  // A lost part is a miss too.
  ASSERT_OK(small->PutState(Key(31), blob, {}));
  ASSERT_OK(RemoveObject(raw_, PartObjectName(StateObjectName(Key(31)), 1)));
  EXPECT_EQ(small->GetState(Key(31)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RadosStateStoreTest, OverwrittenBytesAreCaughtDeletedAndAMiss) {
  const std::string blob = RandomBytes(100000, 5);
  ASSERT_OK(store_->PutState(Key(20), blob, {}));
  // Flip one byte in place, under the store, as `rados put` of other
  // bytes would.
  ASSERT_OK_AND_ASSIGN(std::string stored,
                       ReadObject(raw_, StateObjectName(Key(20))));
  stored[stored.size() / 2] ^= 0x40;
  ceph::bufferlist damaged;
  damaged.append(stored);
  ASSERT_EQ(raw_.write_full(StateObjectName(Key(20)), damaged), 0);
  EXPECT_EQ(store_->GetState(Key(20)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->corruptions(), 1);
  ASSERT_OK_AND_ASSIGN(bool has, store_->HasState(Key(20)));
  EXPECT_FALSE(has) << "the corrupt value was not deleted";
  // Written again, it reads back.
  ASSERT_OK(store_->PutState(Key(20), blob, {}));
  ASSERT_OK_AND_ASSIGN(std::string again, store_->GetState(Key(20)));
  EXPECT_TRUE(again == blob);

  // A block replaced by another valid value: the manifest's checksum
  // catches it.
  const std::vector<std::string> blocks = {RandomBytes(800, 6),
                                           RandomBytes(900, 7)};
  const std::vector<std::string_view> views(blocks.begin(), blocks.end());
  ASSERT_OK(store_->PutStateBlocks(Key(21), std::nullopt, views, {}));
  ASSERT_OK(store_->PutState(Key(22), blocks[0], {}));
  ASSERT_OK_AND_ASSIGN(std::string other,
                       ReadObject(raw_, StateObjectName(Key(22))));
  ceph::bufferlist swapped;
  swapped.append(other);
  ASSERT_EQ(raw_.write_full(BlockObjectName(BlockKey(Key(21), 1)), swapped), 0);
  EXPECT_EQ(store_->GetStateBlocks(Key(21)).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(bool chunked_has, store_->HasState(Key(21)));
  EXPECT_FALSE(chunked_has);
}

TEST_F(RadosStateStoreTest, ListStatesPagesOverEveryStateOnce) {
  const int64_t started_ms = UnixMillisNow();
  std::set<std::string> put;
  for (int i = 0; i < 13; ++i) {
    ASSERT_OK(store_->PutState(Key(100 + i), RandomBytes(64 + i, i),
                               {.tenant = "t"}));
    put.insert(Key(100 + i).Hex());
  }
  const std::vector<std::string> blocks = {RandomBytes(70, 1),
                                           RandomBytes(80, 2)};
  const std::vector<std::string_view> views(blocks.begin(), blocks.end());
  ASSERT_OK(store_->PutStateBlocks(Key(200), std::nullopt, views, {}));
  put.insert(Key(200).Hex());

  std::multiset<std::string> listed;
  std::string token;
  int pages = 0;
  do {
    ASSERT_OK_AND_ASSIGN(StatePage page, store_->ListStates(4, token));
    EXPECT_LE(page.states.size(), 4u);
    for (const StateListing& state : page.states) {
      listed.insert(state.key.Hex());
      EXPECT_GT(state.stored_bytes, 0);
      EXPECT_GE(state.written_unix_ms, started_ms);
      EXPECT_EQ(state.chunked, state.key == Key(200));
      if (state.key != Key(200)) {
        EXPECT_EQ(state.tenant, "t");
      }
    }
    token = page.next_page_token;
    ASSERT_LT(++pages, 50);
  } while (!token.empty());
  EXPECT_EQ(listed.size(), put.size());
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), put);
  EXPECT_EQ(store_->ListStates(4, "not a cursor").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::storage
