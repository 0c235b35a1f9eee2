// Verify, compact and gc of the RocksDB store, with values damaged through
// RocksDB itself.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "storage/rocksdb_state_store.h"
#include "storage/state_ref.h"
#include "tests/storage/raw_db.h"
#include "tests/storage/store_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

using test_util::Key;
using test_util::RandomBytes;
using test_util::Record;

class StoreAdminTest : public test_util::StoreFixture {
 protected:
  static void Flip(test_util::RawDb& raw, const std::string& family,
                   std::string_view key) {
    std::string value;
    ASSERT_OK(raw.Get(family, key, &value));
    value[value.size() / 2] ^= 0x01;
    ASSERT_OK(raw.Put(family, key, value));
  }
  static std::vector<std::string> BadFamilies(const VerifyReport& report) {
    std::vector<std::string> families;
    for (const BadValue& bad : report.bad) families.push_back(bad.family);
    std::sort(families.begin(), families.end());
    return families;
  }
};

TEST_F(StoreAdminTest, VerifyReportsEveryBadValueAndRepairsStates) {
  Open();
  ASSERT_OK(store().PutState(Key(1), RandomBytes(200 << 10, 1), {}));
  ASSERT_OK(store().PutState(Key(2), "small and good", {}));
  ASSERT_OK(store().PutState(Key(3), "small, to be flipped", {}));
  const std::string_view blocks[] = {"block zero", "block one"};
  ASSERT_OK(store().PutStateBlocks(Key(4), std::nullopt, blocks, {}));
  PutDoc(Record("t", "good", {Key(1), Key(2)}));
  PutDoc(Record("t", "bad-record", {Key(2)}));
  PutDoc(Record("t", "bad-tokens", {}));

  absl::StatusOr<VerifyReport> clean = store().Verify({});
  ASSERT_OK(clean);
  EXPECT_TRUE(clean->bad.empty());
  EXPECT_EQ(clean->states_checked, 6);  // 3 whole, a manifest, 2 blocks
  EXPECT_EQ(clean->documents_checked, 3);
  EXPECT_EQ(clean->refs_checked, 3);
  EXPECT_GT(clean->bytes_checked, 200 << 10);
  Close();
  {
    test_util::RawDb raw(Options().path);
    Flip(raw, kStatesFamily, Key(3).Bytes());
    Flip(raw, kStatesFamily, BlockKey(Key(4), 1).Bytes());
    Flip(raw, kDocumentsFamily, std::string("t\0bad-record", 12));
    Flip(raw, kTokensFamily, std::string("t\0bad-tokens", 12));
    Flip(raw, kRefsFamily, RefKey(Key(1), std::string("t\0good", 6)));
  }
  Open();
  const int64_t corruptions_at_open = store().Stats().corruptions;
  absl::StatusOr<VerifyReport> report = store().Verify({});
  ASSERT_OK(report);
  // The block, the manifest naming it, the flipped state, the record and
  // the token blob. (The bad ref was rebuilt from its
  // record at open.)
  EXPECT_EQ(BadFamilies(*report),
            (std::vector<std::string>{"documents", "states", "states", "states",
                                      "tokens"}));
  EXPECT_EQ(report->repaired, 0);
  EXPECT_EQ(corruptions_at_open, 1);
  // Reported, not served and, without repair, not yet deleted.
  EXPECT_TRUE(Has(Key(3)));
  EXPECT_EQ(store().GetState(Key(3)).status().code(),
            absl::StatusCode::kNotFound);

  absl::StatusOr<VerifyReport> repaired = store().Verify({.repair = true});
  ASSERT_OK(repaired);
  EXPECT_EQ(repaired->repaired, 2);  // block + manifest
  EXPECT_FALSE(Has(Key(4)));
  EXPECT_TRUE(Has(Key(1)) && Has(Key(2)));
  EXPECT_EQ(store().Stats().block_count, 0);

  absl::StatusOr<VerifyReport> after = store().Verify({});
  ASSERT_OK(after);
  // Records and tokens are the truth: reported, never deleted.
  EXPECT_EQ(BadFamilies(*after),
            (std::vector<std::string>{"documents", "tokens"}));
}

TEST_F(StoreAdminTest, GcDropsOrphansAndReclaimsBlobSpace) {
  RocksDbStoreOptions options = Options();
  Open(options);
  for (int i = 0; i < 8; ++i) {
    ASSERT_OK(store().PutState(Key(i), RandomBytes(1 << 20, i), {}));
  }
  PutDoc(Record("t", "d", {Key(0)}));
  absl::StatusOr<CompactReport> compacted = store().Compact();
  ASSERT_OK(compacted);
  EXPECT_GT(compacted->disk_bytes_after, 8 << 20);
  for (int i = 1; i < 8; ++i) ASSERT_TRUE(store().DeleteState(Key(i)).ok());
  Close();
  {
    test_util::RawDb raw(options.path);
    ASSERT_TRUE(raw.Put(kRefsFamily, RefKey(Key(5), std::string("t\0gone", 6)),
                        EncodeRef(true))
                    .ok());
  }
  Open(options);
  absl::StatusOr<GcReport> gc = store().CollectGarbage();
  ASSERT_OK(gc);
  EXPECT_EQ(gc->orphan_refs, 1);
  EXPECT_EQ(gc->orphan_blocks, 0);
  // Seven of eight megabyte states were deleted; their blob space is back.
  EXPECT_LT(gc->disk_bytes_after, 3 << 20);
  EXPECT_GT(gc->disk_bytes_before, gc->disk_bytes_after);
  absl::StatusOr<std::string> kept = store().GetState(Key(0));
  ASSERT_OK(kept);
  EXPECT_EQ(*kept, RandomBytes(1 << 20, 0));
}

}  // namespace
}  // namespace twice::storage
