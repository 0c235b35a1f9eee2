// StateStore against a real RocksDB in a temporary directory.
#include "storage/rocksdb_state_store.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "tests/storage/raw_db.h"
#include "tests/storage/store_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

using ::testing::HasSubstr;

using test_util::Key;
using test_util::RandomBytes;
using test_util::RawDb;
using test_util::Tokens;

class RocksDbStateStoreTest : public test_util::StoreFixture {
 protected:
  // A record of 10-token segments over `token_count` tokens.
  DocumentRecord Record(std::string tenant, std::string id,
                        const std::vector<StateKey>& segment_keys,
                        int64_t token_count = 30) {
    DocumentRecord record;
    record.tenant = std::move(tenant);
    record.document_id = std::move(id);
    record.model = "m";
    record.model_fingerprint = "fp";
    record.token_count = token_count;
    record.segment_tokens = 10;
    for (size_t i = 0; i < segment_keys.size(); ++i) {
      record.segments.push_back(
          {static_cast<int64_t>(10 * (i + 1)), segment_keys[i]});
    }
    record.created_unix_ms = 1;
    record.accessed_unix_ms = 2;
    return record;
  }
};

TEST_F(RocksDbStateStoreTest, PutGetRoundTrip) {
  Open();
  ASSERT_OK(store().PutState(Key(1), "one", {}));
  ASSERT_OK(store().PutState(Key(2), "", {}));

  absl::StatusOr<std::string> one = store().GetState(Key(1));
  ASSERT_OK(one);
  EXPECT_EQ(*one, "one");
  absl::StatusOr<std::string> empty = store().GetState(Key(2));
  ASSERT_OK(empty);
  EXPECT_EQ(*empty, "");
  EXPECT_TRUE(*store().HasState(Key(1)));
  EXPECT_FALSE(*store().HasState(Key(3)));

  const StoreStats stats = store().Stats();
  EXPECT_EQ(stats.hits, 2);
  EXPECT_EQ(stats.misses, 0);
  EXPECT_EQ(stats.state_count, 2);
  EXPECT_GT(stats.state_bytes, 3);
}

TEST_F(RocksDbStateStoreTest, MissingStateIsNotFoundAndCountedAsMiss) {
  Open();
  absl::StatusOr<std::string> missing = store().GetState(Key(9));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            absl::StrCat("state ", Key(9).Hex(), " not found"));
  EXPECT_FALSE(*store().HasState(Key(9)));
  EXPECT_EQ(store().Stats().misses, 1);
}

TEST_F(RocksDbStateStoreTest, LargeBlobRoundTripsAcrossReopen) {
  const std::string big = RandomBytes(20 << 20, 7);
  Open();
  ASSERT_OK(store().PutState(Key(1), big, {.recompute_tokens = 8192}));
  absl::StatusOr<std::string> got = store().GetState(Key(1));
  ASSERT_OK(got);
  EXPECT_TRUE(*got == big);
  const StoreStats before = store().Stats();
  EXPECT_GE(before.state_bytes, static_cast<int64_t>(big.size()));
  Close();

  Open();
  got = store().GetState(Key(1));
  ASSERT_OK(got);
  EXPECT_TRUE(*got == big);
  EXPECT_EQ(store().Stats().state_bytes, before.state_bytes);
  EXPECT_EQ(store().Stats().state_count, 1);
}

TEST_F(RocksDbStateStoreTest, ReopenKeepsEverything) {
  Open();
  ASSERT_OK(store().PutState(Key(1), "s1", {}));
  ASSERT_OK(store().PutState(Key(2), "s2", {.recompute_tokens = 3}));
  PutDoc(Record("t", "d1", {Key(1), Key(2)}));
  const StoreStats before = store().Stats();
  Close();

  Open();
  const StoreStats after = store().Stats();
  EXPECT_EQ(after.state_count, 2);
  EXPECT_EQ(after.state_bytes, before.state_bytes);
  EXPECT_EQ(after.document_count, 1);
  EXPECT_EQ(*store().GetState(Key(2)), "s2");
  absl::StatusOr<DocumentRecord> record = store().GetDocument({"t", "d1"});
  ASSERT_OK(record);
  EXPECT_EQ(record->segments.size(), 2u);
  EXPECT_EQ(*store().GetTokens({"t", "d1"}), Tokens(30));
}

TEST_F(RocksDbStateStoreTest, OverwriteAndDeleteKeepCountersExact) {
  Open();
  ASSERT_OK(store().PutState(Key(1), "short", {}));
  const int64_t one_short = store().Stats().state_bytes;
  ASSERT_OK(store().PutState(Key(1), "a longer value", {}));
  EXPECT_EQ(store().Stats().state_count, 1);
  EXPECT_EQ(store().Stats().state_bytes, one_short + 9);

  ASSERT_OK(store().DeleteState(Key(1)));
  ASSERT_TRUE(store().DeleteState(Key(1)).ok());  // idempotent
  ASSERT_TRUE(store().DeleteState(Key(2)).ok());  // never stored
  EXPECT_EQ(store().Stats().state_count, 0);
  EXPECT_EQ(store().Stats().state_bytes, 0);
  EXPECT_FALSE(*store().HasState(Key(2)));
  EXPECT_EQ(store().GetState(Key(1)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RocksDbStateStoreTest, ConcurrentPutsOfSameKeysCountEachOnce) {
  Open();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this] {
      for (int i = 0; i < 50; ++i) {
        EXPECT_OK(store().PutState(Key(i), "v", {}));
        EXPECT_OK(store().GetState(Key(i)));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const StoreStats stats = store().Stats();
  EXPECT_EQ(stats.state_count, 50);
  EXPECT_EQ(stats.hits, 200);
  Close();
  Open();
  EXPECT_EQ(store().Stats().state_count, 50);
  EXPECT_EQ(store().Stats().state_bytes, stats.state_bytes);
}

TEST_F(RocksDbStateStoreTest, CorruptStateIsDeletedCountedAndNotFound) {
  Open();
  ASSERT_OK(store().PutState(Key(1), "good state bytes", {}));
  ASSERT_OK(store().PutState(Key(2), "neighbour", {}));
  Close();
  {
    RawDb raw(Options().path);
    std::string value;
    ASSERT_OK(raw.Get(kStatesFamily, Key(1).Bytes(), &value));
    value[value.size() / 2] ^= 0x01;
    ASSERT_TRUE(raw.db()
                    ->Put(rocksdb::WriteOptions(), raw.family(kStatesFamily),
                          rocksdb::Slice(Key(1).Bytes().data(), 32), value)
                    .ok());
  }

  Open();
  EXPECT_TRUE(*store().HasState(Key(1)));  // HasState does not verify
  absl::StatusOr<std::string> got = store().GetState(Key(1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("corrupt"));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("deleted"));
  StoreStats stats = store().Stats();
  EXPECT_EQ(stats.corruptions, 1);
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.state_count, 1);
  EXPECT_FALSE(*store().HasState(Key(1)));
  EXPECT_EQ(*store().GetState(Key(2)), "neighbour");
  // A second read is a plain miss, not a second corruption.
  EXPECT_THAT(std::string(store().GetState(Key(1)).status().message()),
              HasSubstr("not found"));
  EXPECT_EQ(store().Stats().corruptions, 1);
  Close();

  RawDb raw(Options().path);
  std::string value;
  EXPECT_TRUE(raw.Get(kStatesFamily, Key(1).Bytes(), &value).IsNotFound());
  EXPECT_TRUE(raw.Get(kStateIndexFamily, Key(1).Bytes(), &value).IsNotFound());
}

TEST_F(RocksDbStateStoreTest, CorruptBlobFileOnDiskIsDeletedAndNotFound) {
  const std::string big = RandomBytes(256 << 10, 3);  // above min_blob_size
  Open();
  ASSERT_OK(store().PutState(Key(1), big, {}));
  Close();
  {
    // Flush so the value lands in a blob file rather than only the WAL.
    RawDb raw(Options().path);
    ASSERT_TRUE(raw.db()
                    ->Flush(rocksdb::FlushOptions(), raw.family(kStatesFamily))
                    .ok());
  }
  std::vector<std::filesystem::path> blob_files;
  for (const auto& entry :
       std::filesystem::directory_iterator(Options().path)) {
    if (entry.path().extension() == ".blob") blob_files.push_back(entry.path());
  }
  ASSERT_EQ(blob_files.size(), 1u);
  {
    std::fstream file(blob_files[0],
                      std::ios::in | std::ios::out | std::ios::binary);
    const auto size = std::filesystem::file_size(blob_files[0]);
    file.seekg(size / 2);
    char byte = 0;
    file.read(&byte, 1);
    byte ^= 0x10;
    file.seekp(size / 2);
    file.write(&byte, 1);
    ASSERT_TRUE(file.good());
  }

  Open();
  absl::StatusOr<std::string> got = store().GetState(Key(1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("corrupt"));
  EXPECT_EQ(store().Stats().corruptions, 1);
  EXPECT_EQ(store().Stats().state_count, 0);
  EXPECT_FALSE(*store().HasState(Key(1)));
}

// A store written when second reads were stored for one request holds an
// "ephemeral" family: it opens, keeps everything else and drops the family.
TEST_F(RocksDbStateStoreTest, OpenDropsTheLegacyEphemeralFamily) {
  Open();
  ASSERT_OK(store().PutState(Key(1), "durable", {}));
  Close();
  {
    RawDb raw(Options().path);
    rocksdb::ColumnFamilyHandle* legacy = nullptr;
    ASSERT_TRUE(raw.db()
                    ->CreateColumnFamily(rocksdb::ColumnFamilyOptions(),
                                         kLegacyEphemeralFamily, &legacy)
                    .ok());
    ASSERT_TRUE(raw.db()
                    ->Put(rocksdb::WriteOptions(), legacy,
                          rocksdb::Slice(Key(2).Bytes().data(), 32), "old")
                    .ok());
    ASSERT_OK(raw.db()->DestroyColumnFamilyHandle(legacy));
  }
  std::vector<std::string> families;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(),
                                              Options().path, &families)
                  .ok());
  EXPECT_THAT(families, ::testing::Contains(kLegacyEphemeralFamily));
  Open();
  EXPECT_EQ(*store().GetState(Key(1)), "durable");
  EXPECT_FALSE(*store().HasState(Key(2)));
  Close();
  families.clear();
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(),
                                              Options().path, &families)
                  .ok());
  EXPECT_THAT(families,
              ::testing::Not(::testing::Contains(kLegacyEphemeralFamily)));
}

TEST_F(RocksDbStateStoreTest, DocumentRoundTrip) {
  Open();
  DocumentRecord record = Record("t", "d1", {Key(1), Key(2), Key(3)});
  record.text_sha256 = "abcd";
  record.mode_states = {{"prefix", Key(4)}};
  record.pinned = true;
  PutDoc(record);
  EXPECT_EQ(store().Stats().document_count, 1);
  PutDoc(record);  // replacing is not a new document
  EXPECT_EQ(store().Stats().document_count, 1);

  absl::StatusOr<DocumentRecord> got = store().GetDocument({"t", "d1"});
  ASSERT_OK(got);
  EXPECT_EQ(got->text_sha256, "abcd");
  EXPECT_EQ(got->mode_states, record.mode_states);
  EXPECT_TRUE(got->pinned);
  EXPECT_EQ(got->segments[2].state_key, Key(3));
  EXPECT_EQ(*store().GetTokens({"t", "d1"}), Tokens(30));

  EXPECT_EQ(store().GetDocument({"t", "nope"}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store().GetDocument({"u", "d1"}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store().GetTokens({"t", "nope"}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RocksDbStateStoreTest, UpdateDocumentReplacesRecordOnly) {
  Open();
  PutDoc(Record("t", "d1", {Key(1)}));
  DocumentRecord update = Record("t", "d1", {Key(1)});
  update.revision = 1;
  update.pinned = true;
  update.accessed_unix_ms = 77;
  ASSERT_OK(store().UpdateDocument(update));
  absl::StatusOr<DocumentRecord> got = store().GetDocument({"t", "d1"});
  ASSERT_OK(got);
  EXPECT_TRUE(got->pinned);
  EXPECT_EQ(got->accessed_unix_ms, 77);
  EXPECT_EQ(*store().GetTokens({"t", "d1"}), Tokens(30));

  update.revision = 2;
  update.token_count = 31;
  EXPECT_EQ(store().UpdateDocument(update).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store().UpdateDocument(Record("t", "other", {})).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store().Stats().document_count, 1);
}

TEST_F(RocksDbStateStoreTest, ListDocumentsPaginatesWithinTenant) {
  Open();
  for (const char* id : {"e", "a", "g", "c", "b", "f", "d"}) {
    PutDoc(Record("acme", id, {}));
  }
  // Neighbouring tenants whose keys sort right around "acme\0...".
  PutDoc(Record("acm", "z", {}));
  PutDoc(Record("acmeco", "a", {}));
  PutDoc(Record("acme\x01", "a", {}));

  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    absl::StatusOr<DocumentPage> page = store().ListDocuments("acme", 3, token);
    ASSERT_OK(page);
    ASSERT_LE(page->records.size(), 3u);
    for (const DocumentRecord& r : page->records) {
      EXPECT_EQ(r.tenant, "acme");
      seen.push_back(r.document_id);
    }
    token = page->next_page_token;
    ++pages;
  } while (!token.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen,
            (std::vector<std::string>{"a", "b", "c", "d", "e", "f", "g"}));

  absl::StatusOr<DocumentPage> all = store().ListDocuments("acme", 0, "");
  ASSERT_OK(all);
  EXPECT_EQ(all->records.size(), 7u);
  EXPECT_TRUE(all->next_page_token.empty());

  // An exact final page has no next token.
  absl::StatusOr<DocumentPage> exact = store().ListDocuments("acme", 7, "");
  ASSERT_OK(exact);
  EXPECT_TRUE(exact->next_page_token.empty());

  // Resuming after a document deleted in between still works.
  ASSERT_OK(store().DeleteDocument({"acme", "c"}));
  absl::StatusOr<DocumentPage> resumed = store().ListDocuments("acme", 2, "c");
  ASSERT_OK(resumed);
  ASSERT_EQ(resumed->records.size(), 2u);
  EXPECT_EQ(resumed->records[0].document_id, "d");
  EXPECT_EQ(resumed->next_page_token, "e");

  absl::StatusOr<DocumentPage> none = store().ListDocuments("nobody", 0, "");
  ASSERT_OK(none);
  EXPECT_TRUE(none->records.empty());
  EXPECT_EQ(store().ListDocuments("acme", -1, "").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RocksDbStateStoreTest, DeleteDocumentKeepsSharedStates) {
  Open();
  for (int i = 1; i <= 5; ++i) {
    ASSERT_OK(store().PutState(Key(i), "state", {}));
  }
  DocumentRecord first = Record("t", "first", {Key(1), Key(2)});
  first.mode_states = {{"prefix", Key(3)}};
  PutDoc(first);
  DocumentRecord second = Record("t", "second", {Key(1)});
  second.mode_states = {{"prefix", Key(3)}};
  PutDoc(second);
  // Another tenant naming Key(2) keeps it too: the store does not assume
  // keys are tenant-scoped.
  PutDoc(Record("u", "third", {Key(2)}));

  absl::StatusOr<int64_t> deleted = store().DeleteDocument({"t", "first"});
  ASSERT_OK(deleted);
  EXPECT_EQ(*deleted, 0);
  EXPECT_EQ(store().GetDocument({"t", "first"}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store().GetTokens({"t", "first"}).status().code(),
            absl::StatusCode::kNotFound);

  deleted = store().DeleteDocument({"t", "second"});
  ASSERT_OK(deleted);
  EXPECT_EQ(*deleted, 2);  // Key(1) and Key(3)
  EXPECT_FALSE(*store().HasState(Key(1)));
  EXPECT_FALSE(*store().HasState(Key(3)));
  EXPECT_TRUE(*store().HasState(Key(2)));
  EXPECT_TRUE(*store().HasState(Key(4)));  // named by no record

  deleted = store().DeleteDocument({"u", "third"});
  ASSERT_OK(deleted);
  EXPECT_EQ(*deleted, 1);

  const StoreStats stats = store().Stats();
  EXPECT_EQ(stats.document_count, 0);
  EXPECT_EQ(stats.state_count, 2);  // Key(4), Key(5)
  EXPECT_EQ(store().DeleteDocument({"t", "first"}).status().code(),
            absl::StatusCode::kNotFound);
  Close();
  Open();
  EXPECT_EQ(store().Stats().state_count, 2);
  EXPECT_EQ(store().Stats().document_count, 0);
}

TEST_F(RocksDbStateStoreTest, DeleteDocumentCountsOnlyStoredStates) {
  Open();
  ASSERT_OK(store().PutState(Key(1), "state", {}));
  PutDoc(Record("t", "d", {Key(1), Key(2)}));  // Key(2) was never stored
  absl::StatusOr<int64_t> deleted = store().DeleteDocument({"t", "d"});
  ASSERT_OK(deleted);
  EXPECT_EQ(*deleted, 1);
  EXPECT_EQ(store().Stats().state_count, 0);
}

TEST_F(RocksDbStateStoreTest, CorruptRecordIsDataLossAndCanBeDeleted) {
  Open();
  PutDoc(Record("t", "d", {}));
  Close();
  {
    RawDb raw(Options().path);
    const std::string key("t\0d", 3);
    std::string value;
    ASSERT_OK(raw.Get(kDocumentsFamily, key, &value));
    value[value.size() / 2] ^= 0x04;
    ASSERT_TRUE(raw.db()
                    ->Put(rocksdb::WriteOptions(), raw.family(kDocumentsFamily),
                          key, value)
                    .ok());
  }
  Open();
  EXPECT_EQ(store().GetDocument({"t", "d"}).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(store().ListDocuments("t", 0, "").status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_OK(store().GetTokens({"t", "d"}));
  absl::StatusOr<int64_t> deleted = store().DeleteDocument({"t", "d"});
  ASSERT_OK(deleted);
  EXPECT_EQ(store().GetTokens({"t", "d"}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store().Stats().document_count, 0);
}

TEST_F(RocksDbStateStoreTest, SecondOpenOfSameDirectoryIsUnavailable) {
  Open();
  absl::StatusOr<std::unique_ptr<Store>> second = OpenRocksDbStore(Options());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable)
      << second.status();
  // The first instance is unaffected, and the directory reopens once closed.
  ASSERT_OK(store().PutState(Key(1), "x", {}));
  Close();
  Open();
  EXPECT_EQ(*store().GetState(Key(1)), "x");
}

TEST_F(RocksDbStateStoreTest, DirectoryLockedByAnotherProcessIsUnavailable) {
  // Another process takes the same fcntl lock RocksDB takes on LOCK and
  // holds it until its stdin closes.
  if (access("/usr/bin/python3", X_OK) != 0) {
    GTEST_SKIP() << "needs /usr/bin/python3 to hold the lock";
  }
  Open();
  Close();
  const std::string lock_path = Options().path + "/LOCK";
  const std::string ready_path = dir_.path() + "/locked";
  const std::string command =
      "/usr/bin/python3 -c \"import fcntl,os,sys\n"
      "fd=os.open('" +
      lock_path +
      "', os.O_RDWR)\n"
      "fcntl.lockf(fd, fcntl.LOCK_EX|fcntl.LOCK_NB)\n"
      "open('" +
      ready_path +
      "','w').close()\n"
      "sys.stdin.read()\"";
  FILE* holder = popen(command.c_str(), "w");
  ASSERT_NE(holder, nullptr);
  for (int i = 0; i < 500 && !std::filesystem::exists(ready_path); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(std::filesystem::exists(ready_path));

  absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(Options());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable)
      << store.status();
  EXPECT_EQ(pclose(holder), 0);
  Open();  // the lock is free again
}

TEST_F(RocksDbStateStoreTest, InvalidInputs) {
  Open();
  auto code = [](const absl::Status& s) { return s.code(); };
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

  EXPECT_EQ(code(store().PutDocument(Record("", "d", {}), Tokens(30))),
            kInvalid);
  EXPECT_EQ(code(store().PutDocument(Record("t", "", {}), Tokens(30))),
            kInvalid);
  EXPECT_EQ(code(store().PutDocument(Record("t", "d", {}), Tokens(29))),
            kInvalid);
  DocumentRecord bad = Record("t", "d", {Key(1), Key(2)});
  bad.segments[1].end_token = bad.segments[0].end_token;
  EXPECT_EQ(code(store().PutDocument(bad, Tokens(30))), kInvalid);
  bad = Record("t", "d", {Key(1), Key(2)});
  bad.segments[1].end_token = 31;
  EXPECT_EQ(code(store().PutDocument(bad, Tokens(30))), kInvalid);
  EXPECT_EQ(code(store().UpdateDocument(Record("", "d", {}))), kInvalid);

  EXPECT_EQ(code(store().GetDocument({"", "d"}).status()), kInvalid);
  EXPECT_EQ(code(store().GetDocument({"t", ""}).status()), kInvalid);
  EXPECT_EQ(code(store().GetTokens({"", "d"}).status()), kInvalid);
  EXPECT_EQ(code(store().ListDocuments("", 0, "").status()), kInvalid);
  EXPECT_EQ(code(store().DeleteDocument({"t", ""}).status()), kInvalid);
  EXPECT_EQ(code(store().PutState(Key(1), "x", {.recompute_tokens = -1})),
            kInvalid);

  EXPECT_EQ(store().Stats().document_count, 0);
  EXPECT_EQ(store().Stats().state_count, 0);

  RocksDbStoreOptions options = Options();
  options.path.clear();
  EXPECT_EQ(OpenRocksDbStore(options).status().code(), kInvalid);
}

TEST_F(RocksDbStateStoreTest, RecomputesAreCounted) {
  Open();
  store().RecordRecompute();
  store().RecordRecompute();
  EXPECT_EQ(store().Stats().recomputes, 2);
  EXPECT_EQ(store().Stats().evictions, 0);
}

TEST_F(RocksDbStateStoreTest, SyncWritesRoundTrip) {
  RocksDbStoreOptions options = Options();
  options.sync_writes = true;
  Open(options);
  ASSERT_OK(store().PutState(Key(1), "synced", {}));
  PutDoc(Record("t", "d", {Key(1)}));
  Close();
  Open();
  EXPECT_EQ(*store().GetState(Key(1)), "synced");
  EXPECT_OK(store().GetDocument({"t", "d"}));
}

}  // namespace
}  // namespace twice::storage
