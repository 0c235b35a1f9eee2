// The registry of immutable host regions a device backend may cache:
// containment lookups, fresh ids per registration (so a cache keyed by id
// never serves a stale copy after memory is mapped again), unregistering.
#include "kernels/immutable_host_regions.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"

namespace twice::kernels {
namespace {

TEST(ImmutableHostRegionsTest, FindsRangesInsideARegionOnly) {
  std::vector<float> memory(100);
  const uint64_t id =
      RegisterImmutableHostRegion(memory.data() + 10, 50 * sizeof(float));
  EXPECT_GT(id, 0u);
  std::optional<ImmutableHostRegion> inside =
      FindImmutableHostRegion(memory.data() + 20, 10 * sizeof(float));
  ASSERT_TRUE(inside.has_value());
  EXPECT_EQ(inside->id, id);
  EXPECT_EQ(inside->data, memory.data() + 10);
  // Whole region, straddling either end, and outside.
  EXPECT_TRUE(FindImmutableHostRegion(memory.data() + 10, 50 * sizeof(float)));
  EXPECT_FALSE(FindImmutableHostRegion(memory.data() + 5, 10 * sizeof(float)));
  EXPECT_FALSE(FindImmutableHostRegion(memory.data() + 55, 10 * sizeof(float)));
  EXPECT_FALSE(FindImmutableHostRegion(memory.data() + 70, sizeof(float)));
  UnregisterImmutableHostRegion(id);
  EXPECT_FALSE(ImmutableHostRegionLive(id));
  EXPECT_FALSE(FindImmutableHostRegion(memory.data() + 20, sizeof(float)));
}

TEST(ImmutableHostRegionsTest, ReRegisteringTheSameMemoryGivesANewId) {
  std::vector<float> memory(16);
  const uint64_t first =
      RegisterImmutableHostRegion(memory.data(), memory.size() * sizeof(float));
  UnregisterImmutableHostRegion(first);
  const uint64_t second =
      RegisterImmutableHostRegion(memory.data(), memory.size() * sizeof(float));
  EXPECT_NE(first, second);
  EXPECT_FALSE(ImmutableHostRegionLive(first));
  EXPECT_TRUE(ImmutableHostRegionLive(second));
  UnregisterImmutableHostRegion(second);
  UnregisterImmutableHostRegion(second);  // unknown ids are ignored
}

TEST(ImmutableHostRegionsTest, NoBackendByDefault) {
  EXPECT_EQ(ActiveKernelBackend(), nullptr);
}

}  // namespace
}  // namespace twice::kernels
