#include "storage/ephemeral_ttl.h"

#include <atomic>
#include <string>

#include "gtest/gtest.h"
#include "storage/state_value.h"

namespace twice::storage {
namespace {

TEST(EphemeralTtlTest, IsExpiredAtTheBoundary) {
  EXPECT_FALSE(IsExpired(1000, 1999, 1000));
  EXPECT_TRUE(IsExpired(1000, 2000, 1000));
  EXPECT_FALSE(IsExpired(5000, 1000, 1000));  // written "in the future"
}

TEST(EphemeralTtlTest, FilterDropsExpiredAndUndecodableValues) {
  int64_t now = 10'000;
  std::atomic<int64_t> corruptions{0};
  const EphemeralTtlFilter filter(
      1000, [&now] { return now; }, &corruptions);
  const std::string fresh = EncodeStateValue("fresh", 0, 9'500);
  const std::string old = EncodeStateValue("old", 0, 8'000);
  std::string new_value;
  bool changed = false;

  EXPECT_FALSE(filter.Filter(0, "k", fresh, &new_value, &changed));
  EXPECT_TRUE(filter.Filter(0, "k", old, &new_value, &changed));
  EXPECT_EQ(corruptions.load(), 0);

  now = 10'500;  // the fresh one has now lived exactly its TTL
  EXPECT_TRUE(filter.Filter(0, "k", fresh, &new_value, &changed));

  std::string garbage = fresh;
  garbage[garbage.size() / 2] ^= 0x40;
  EXPECT_TRUE(filter.Filter(0, "k", garbage, &new_value, &changed));
  EXPECT_EQ(corruptions.load(), 1);
  EXPECT_FALSE(changed);
}

}  // namespace
}  // namespace twice::storage
