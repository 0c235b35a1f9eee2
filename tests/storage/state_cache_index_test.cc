// StateCacheIndex on its own: accounting, pins, block counts and the
// eviction order.
#include "storage/state_cache_index.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/storage/store_test_util.h"

namespace twice::storage {
namespace {

using test_util::Key;

CachedState Whole(int64_t bytes, int64_t tokens) {
  return {.stored_bytes = bytes,
          .recompute_tokens = tokens,
          .flops_per_token = 0,
          .form = StateForm::kWhole,
          .blocks = {}};
}

std::vector<StateKey> Order(const std::vector<EvictionVictim>& victims) {
  std::vector<StateKey> keys;
  for (const EvictionVictim& victim : victims) keys.push_back(victim.key);
  return keys;
}

TEST(StateCacheIndexTest, TotalsFollowUpsertsRemovesAndPins) {
  StateCacheIndex index;
  index.Upsert(Key(1), Whole(100, 1));
  index.Upsert(Key(2), Whole(50, 1));
  index.Upsert(Key(1), Whole(70, 1));  // replaced, not added
  EXPECT_EQ(index.Totals().bytes, 120);
  EXPECT_EQ(index.Totals().states, 2);
  index.AddRefs(Key(1), 1, 1);
  index.AddRefs(Key(9), 1, 1);  // a record may name an absent state
  EXPECT_EQ(index.Totals().pinned_states, 1);
  EXPECT_TRUE(index.IsPinned(Key(1)));
  EXPECT_TRUE(index.Remove(Key(1), nullptr).has_value());
  EXPECT_EQ(index.Totals().pinned_states, 0);
  EXPECT_EQ(index.Totals().bytes, 50);
  EXPECT_FALSE(index.Remove(Key(1), nullptr).has_value());
  index.AddRefs(Key(9), -1, -1);
  EXPECT_FALSE(index.IsPinned(Key(9)));
}

TEST(StateCacheIndexTest, VictimsByCostPerByteAndRecency) {
  StateCacheIndex index;
  index.Upsert(Key(1), Whole(1000, 1000));   // old, efficient
  index.Upsert(Key(2), Whole(1000, 10));     // middle, cheap
  index.Upsert(Key(3), Whole(10000, 1000));  // new, big: 10x less per byte
  index.Upsert(Key(4), Whole(1000, 1000));   // newest, efficient
  EXPECT_EQ(Order(index.PickVictims(1, 1.0, {})),
            std::vector<StateKey>{Key(2)});
  // Key(3) is newer than Key(1) but saves ten times less per byte.
  EXPECT_EQ(Order(index.PickVictims(1500, 1.0, {})),
            (std::vector<StateKey>{Key(2), Key(3)}));
  // Pure recency (LRU) and exclusions.
  EXPECT_EQ(Order(index.PickVictims(1, 0.0, {})),
            std::vector<StateKey>{Key(1)});
  EXPECT_EQ(Order(index.PickVictims(1, 0.0, {Key(1)})),
            std::vector<StateKey>{Key(2)});
  index.Touch(Key(1));
  EXPECT_EQ(Order(index.PickVictims(1, 0.0, {})),
            std::vector<StateKey>{Key(2)});
  index.AddRefs(Key(2), 1, 1);
  EXPECT_EQ(Order(index.PickVictims(1, 1.0, {})),
            std::vector<StateKey>{Key(3)});
}

TEST(StateCacheIndexTest, ManifestsOwnTheirBlocksForEviction) {
  StateCacheIndex index;
  for (int b = 10; b < 13; ++b) {
    index.Upsert(Key(b), {.stored_bytes = 100,
                          .recompute_tokens = 0,
                          .flops_per_token = 0,
                          .form = StateForm::kBlock,
                          .blocks = {}});
  }
  index.Upsert(Key(1), {.stored_bytes = 10,
                        .recompute_tokens = 5,
                        .flops_per_token = 0,
                        .form = StateForm::kManifest,
                        .blocks = {Key(10), Key(11)}});
  index.Upsert(Key(2), {.stored_bytes = 10,
                        .recompute_tokens = 50,
                        .flops_per_token = 0,
                        .form = StateForm::kManifest,
                        .blocks = {Key(10), Key(11), Key(12)}});
  EXPECT_EQ(index.Totals().blocks, 3);
  EXPECT_EQ(index.Totals().states, 2);
  // Blocks are never victims; a manifest frees its blocks only it names.
  const std::vector<EvictionVictim> victims = index.PickVictims(1000, 1.0, {});
  ASSERT_EQ(victims.size(), 2u);
  EXPECT_EQ(victims[0].key, Key(1));
  EXPECT_EQ(victims[0].freed_bytes, 10);
  EXPECT_EQ(victims[1].freed_bytes, 110);
  EXPECT_EQ(index.OrphansIfRemoved({Key(2)}), StateKeySet{Key(12)});
  EXPECT_EQ(index.OrphansIfRemoved({Key(1), Key(2)}),
            (StateKeySet{Key(10), Key(11), Key(12)}));
  std::vector<StateKey> orphaned;
  index.Remove(Key(2), &orphaned);
  EXPECT_EQ(orphaned, std::vector<StateKey>{Key(12)});
  EXPECT_EQ(index.OrphanBlocks(), std::vector<StateKey>{Key(12)});
}

TEST(StateCacheIndexTest, TenantBytesAndVictimsOfOneTenant) {
  StateCacheIndex index;
  auto of = [](const std::string& tenant, int64_t bytes, StateForm form,
               std::vector<StateKey> blocks) {
    return CachedState{.stored_bytes = bytes,
                       .recompute_tokens = 1,
                       .flops_per_token = 0,
                       .form = form,
                       .blocks = std::move(blocks),
                       .tenant = tenant};
  };
  index.Upsert(Key(1), of("a", 100, StateForm::kWhole, {}));  // oldest
  index.Upsert(Key(2), of("b", 50, StateForm::kWhole, {}));
  index.Upsert(Key(10), of("a", 1000, StateForm::kBlock, {}));
  index.Upsert(Key(3), of("a", 10, StateForm::kManifest, {Key(10)}));
  index.Upsert(Key(4), of("", 7, StateForm::kWhole, {}));
  EXPECT_EQ(index.TenantBytes("a"), 1110);
  EXPECT_EQ(index.TenantBytes("b"), 50);
  EXPECT_EQ(index.TenantBytes(""), 0);
  EXPECT_EQ(index.Totals().bytes, 1167);

  // Only a's states are candidates, however old or cheap b's are.
  EXPECT_EQ(Order(index.PickVictims(1, 0.0, {}, "a")),
            std::vector<StateKey>{Key(1)});
  EXPECT_EQ(Order(index.PickVictims(5000, 0.0, {}, "a")),
            (std::vector<StateKey>{Key(1), Key(3)}));
  EXPECT_EQ(Order(index.PickVictims(5000, 0.0, {Key(1)}, "b")),
            std::vector<StateKey>{Key(2)});
  EXPECT_TRUE(index.PickVictims(5000, 0.0, {}, "c").empty());

  index.Upsert(Key(1), of("a", 30, StateForm::kWhole, {}));  // replaced
  EXPECT_EQ(index.TenantBytes("a"), 1040);
  std::vector<StateKey> orphaned;
  index.Remove(Key(3), &orphaned);
  index.Remove(Key(10), nullptr);
  index.Remove(Key(2), nullptr);
  EXPECT_EQ(index.TenantBytes("a"), 30);
  EXPECT_EQ(index.TenantBytes("b"), 0);
}

}  // namespace
}  // namespace twice::storage
