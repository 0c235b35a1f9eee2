// KvBlockTable, the paged KV caches' block bookkeeping: reservations are
// all or none, a slot gives back exactly the blocks past its tokens, and
// its rows map to pool rows through its blocks in order.
#include "engine/executor/kv_block_table.h"

#include <cstdint>
#include <vector>

#include "engine/executor/no_room.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

TEST(KvBlockTableTest, AReservationIsAllOrNone) {
  KvBlockTable table(/*blocks=*/5, /*block_size=*/4, /*slots=*/3);
  ASSERT_OK(table.Reserve({0, 1}, {9, 4}));  // 3 + 1 blocks
  EXPECT_EQ(table.free_blocks(), 1);
  // Slot 2 needs 2 blocks and slot 0 one more: refused as a whole.
  const absl::Status refused = table.Reserve({0, 2}, {13, 5});
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_TRUE(IsNoRoom(refused));
  EXPECT_EQ(table.free_blocks(), 1);
  EXPECT_EQ(table.blocks_of(0).size(), 3u);
  EXPECT_TRUE(table.blocks_of(2).empty());
  // Reserving what a slot already holds takes nothing.
  ASSERT_OK(table.Reserve({0}, {12}));
  EXPECT_EQ(table.free_blocks(), 1);
}

TEST(KvBlockTableTest, ShrinkGivesBackOnlyTheBlocksPastTheTokens) {
  KvBlockTable table(/*blocks=*/8, /*block_size=*/4, /*slots=*/2);
  ASSERT_OK(table.Reserve({0}, {16}));
  const std::vector<int32_t> before(table.blocks_of(0).begin(),
                                    table.blocks_of(0).end());
  table.Shrink(0, 5);  // 5 tokens keep 2 blocks
  EXPECT_EQ(table.free_blocks(), 6);
  ASSERT_EQ(table.blocks_of(0).size(), 2u);
  EXPECT_EQ(table.blocks_of(0)[0], before[0]);
  EXPECT_EQ(table.blocks_of(0)[1], before[1]);
  table.Shrink(0, 8);  // holds exactly 8: nothing to give back
  EXPECT_EQ(table.free_blocks(), 6);
  // Growing again at once gets the same blocks back, in order.
  ASSERT_OK(table.Reserve({0}, {16}));
  EXPECT_EQ(std::vector<int32_t>(table.blocks_of(0).begin(),
                                 table.blocks_of(0).end()),
            before);
  table.Free(0);
  EXPECT_EQ(table.free_blocks(), 8);
  EXPECT_TRUE(table.blocks_of(0).empty());
}

TEST(KvBlockTableTest, RunsFollowTheSlotsBlocks) {
  KvBlockTable table(/*blocks=*/6, /*block_size=*/4, /*slots=*/2);
  // Interleaved growth: slot 0 gets blocks 0, 2, 3; slot 1 gets 1.
  ASSERT_OK(table.Reserve({0}, {4}));
  ASSERT_OK(table.Reserve({1}, {4}));
  ASSERT_OK(table.Reserve({0}, {10}));
  ASSERT_OK_AND_ASSIGN(std::vector<KvBlockTable::Run> runs, table.Runs(0, 10));
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].first, 0);
  EXPECT_EQ(runs[0].pool_row, 0);
  EXPECT_EQ(runs[0].count, 4);
  EXPECT_EQ(runs[1].first, 4);
  EXPECT_EQ(runs[1].pool_row, 8);  // blocks 2 and 3, consecutive
  EXPECT_EQ(runs[1].count, 6);
  EXPECT_EQ(table.Runs(0, 13).status().code(), absl::StatusCode::kInternal);
  const BlockTableRows rows = table.Rows({1, 0});
  EXPECT_EQ(rows.width, 3);
  EXPECT_EQ(rows.blocks, (std::vector<int32_t>{1, -1, -1, 0, 2, 3}));
}

}  // namespace
}  // namespace twice::engine
