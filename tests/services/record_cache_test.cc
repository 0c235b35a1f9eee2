// The orchestrator's record cache and the read that confirms a cached
// record, over a real RocksDB store: the cache keeps the latest records
// within its byte budget, least recently used out first, tenants apart;
// a confirmation says yes only to the record the store holds now.
#include "services/orchestrator/record_cache.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/orchestrator/record_confirmation.h"
#include "storage/rocksdb_state_store.h"
#include "tests/storage/store_test_util.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace twice::services {
namespace {

using storage::DocumentRecord;
using storage::test_util::AtStoredRevision;
using storage::test_util::Key;
using storage::test_util::Tokens;

// A record of one 10-token segment per key.
DocumentRecord Record(const std::string& tenant, const std::string& id,
                      const std::vector<storage::StateKey>& keys) {
  DocumentRecord record;
  record.tenant = tenant;
  record.document_id = id;
  record.model = tenant + "-model";
  record.model_fingerprint = tenant + "-fingerprint";
  for (const storage::StateKey& key : keys) {
    record.token_count += 10;
    record.segments.push_back({record.token_count, key});
  }
  record.segment_tokens = 10;
  record.created_unix_ms = 1;
  record.accessed_unix_ms = 2;
  return record;
}

TEST(RecordCacheTest, KeepsTheLatestRecordPerTenantAndDocument) {
  RecordCache cache(1 << 20);
  DocumentRecord a = Record("t1", "doc", {Key(1)});
  DocumentRecord b = Record("t2", "doc", {Key(2)});
  cache.Put(a);
  cache.Put(b);
  ASSERT_TRUE(cache.Find({"t1", "doc"}).has_value());
  EXPECT_TRUE(SameRecord(cache.Find({"t1", "doc"})->record, a));
  EXPECT_TRUE(SameRecord(cache.Find({"t2", "doc"})->record, b));
  EXPECT_FALSE(cache.Find({"t1", "other"}).has_value());

  a.revision = 5;
  cache.Put(a);
  EXPECT_EQ(cache.Find({"t1", "doc"})->record.revision, 5);
  cache.Forget({"t1", "doc"});
  EXPECT_FALSE(cache.Find({"t1", "doc"}).has_value());
  EXPECT_TRUE(cache.Find({"t2", "doc"}).has_value());
  EXPECT_EQ(cache.bytes(), RecordBytes(b));
}

TEST(RecordCacheTest, StaysWithinItsBytesLeastRecentlyUsedFirst) {
  const DocumentRecord probe = Record("t", "d0", {Key(0)});
  const int64_t each = RecordBytes(probe);
  RecordCache cache(3 * each);
  for (int i = 0; i < 3; ++i) {
    cache.Put(Record("t", absl::StrCat("d", i), {Key(i)}));
  }
  ASSERT_TRUE(cache.Find({"t", "d0"}).has_value());  // now most recent
  cache.Put(Record("t", "d3", {Key(3)}));
  EXPECT_LE(cache.bytes(), 3 * each);
  EXPECT_TRUE(cache.Find({"t", "d0"}).has_value());
  EXPECT_FALSE(cache.Find({"t", "d1"}).has_value());  // least recently used
  EXPECT_TRUE(cache.Find({"t", "d2"}).has_value());
  EXPECT_TRUE(cache.Find({"t", "d3"}).has_value());

  // A record larger than the whole budget is not kept, and evicts nothing.
  std::vector<storage::StateKey> many;
  for (int i = 0; i < 64; ++i) many.push_back(Key(100 + i));
  cache.Put(Record("t", "huge", many));
  EXPECT_FALSE(cache.Find({"t", "huge"}).has_value());
  EXPECT_TRUE(cache.Find({"t", "d3"}).has_value());
}

TEST(RecordCacheTest, SameRecordIgnoresOnlyTheAccessTime) {
  const DocumentRecord base = Record("t", "doc", {Key(1), Key(2)});
  DocumentRecord touched = base;
  touched.accessed_unix_ms += 1000;
  EXPECT_TRUE(SameRecord(base, touched));

  DocumentRecord rewritten = base;
  rewritten.revision += 1;
  EXPECT_FALSE(SameRecord(base, rewritten));
  DocumentRecord reborn = base;  // deleted and ingested again
  reborn.created_unix_ms += 1;
  EXPECT_FALSE(SameRecord(base, reborn));
  DocumentRecord longer = base;
  longer.segments.push_back({30, Key(3)});
  longer.token_count = 30;
  EXPECT_FALSE(SameRecord(base, longer));
  DocumentRecord other_state = base;
  other_state.segments[1].state_key = Key(9);
  EXPECT_FALSE(SameRecord(base, other_state));
  DocumentRecord with_prefix = base;
  with_prefix.mode_states.push_back({"prefix", Key(4)});
  EXPECT_FALSE(SameRecord(base, with_prefix));
}

class RecordConfirmationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::RocksDbStoreOptions options;
    options.path = dir_.path();
    options.sync_writes = false;
    auto store = storage::OpenRocksDbStore(options);
    ASSERT_OK(store);
    store_ = *std::move(store);
  }

  // Writes `record` as the next revision; returns what the store holds.
  DocumentRecord Write(const DocumentRecord& record) {
    EXPECT_OK(store_->PutDocument(AtStoredRevision(*store_, record),
                                  Tokens(record.token_count)));
    absl::StatusOr<DocumentRecord> stored =
        store_->GetDocument(storage::RefOf(record));
    EXPECT_OK(stored);
    return stored.ok() ? *stored : DocumentRecord{};
  }

  testing::TempDir dir_;
  std::unique_ptr<storage::Store> store_;
};

TEST_F(RecordConfirmationTest, ConfirmsOnlyTheRecordStoredNow) {
  const DocumentRecord first = Write(Record("t", "doc", {Key(1)}));
  {
    RecordConfirmation confirmation(*store_, first);
    EXPECT_TRUE(confirmation.Confirmed());
    EXPECT_TRUE(confirmation.Confirmed());  // asked again: same answer
  }
  const DocumentRecord second = Write(Record("t", "doc", {Key(1), Key(2)}));
  {
    RecordConfirmation confirmation(*store_, first);
    EXPECT_FALSE(confirmation.Confirmed());
    absl::StatusOr<DocumentRecord> current = confirmation.Current();
    ASSERT_OK(current);
    EXPECT_TRUE(SameRecord(*current, second));
  }
  ASSERT_OK(store_->DeleteDocument({"t", "doc"}));
  {
    RecordConfirmation confirmation(*store_, second);
    EXPECT_FALSE(confirmation.Confirmed());
    EXPECT_TRUE(absl::IsNotFound(confirmation.Current().status()))
        << confirmation.Current().status();
  }
  // Another tenant's document of the same id and content is not this one.
  Write(Record("u", "doc", {Key(1)}));
  RecordConfirmation confirmation(*store_, first);
  EXPECT_FALSE(confirmation.Confirmed());
  EXPECT_TRUE(absl::IsNotFound(confirmation.Current().status()));
}

}  // namespace
}  // namespace twice::services
