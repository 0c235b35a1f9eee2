// A damaged block in a file of the documents family is damage to the truth
// (records and tokens are never recomputed), so unlike a damaged state it
// is never given up in silence: reads of the records in it answer
// DATA_LOSS naming the document, Verify lists them, the compaction that
// meets it is counted in catalog_corruptions, and RocksDB's background
// error is left raised (BackgroundErrorListener suppresses it only for the
// cache families, tests/storage/blob_corruption_test.cc).
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC bug 105329, as elsewhere

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rocksdb/table_properties.h"
#include "tests/storage/raw_db.h"
#include "tests/storage/store_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

using test_util::Key;
using test_util::RawDb;
using test_util::Record;
using test_util::StoreFixture;
using test_util::Tokens;

constexpr int kDocuments = 300;

std::string Id(int i) {
  char id[16];
  std::snprintf(id, sizeof(id), "doc-%03d", i);
  return id;
}

class CatalogCorruptionTest : public StoreFixture {
 protected:
  // Overwrites 32 bytes in the middle of the data blocks of every SST file
  // of the documents family (data blocks come first in a block-based table;
  // the index and footer after them stay intact, so the files still open).
  // The store must be closed.
  int CorruptDocumentBlocks() {
    rocksdb::TablePropertiesCollection tables;
    {
      RawDb raw(dir_.path() + "/db");
      const rocksdb::Status s = raw.db()->GetPropertiesOfAllTables(
          raw.family(kDocumentsFamily), &tables);
      EXPECT_OK(s);
    }
    int files = 0;
    for (const auto& [path, properties] : tables) {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(properties->data_size / 2));
      f.write(std::string(32, '\x5a').data(), 32);
      files += f.good() ? 1 : 0;
    }
    return files;
  }
};

TEST_F(CatalogCorruptionTest, DamagedRecordsAreReportedNeverSuppressed) {
  Open();
  for (int i = 0; i < kDocuments; ++i) {
    PutDoc(Record("t", Id(i), {Key(i)}));
  }
  // Flushes every family into SST files (one per family at the bottom).
  ASSERT_OK(store().Compact());
  Close();
  ASSERT_EQ(CorruptDocumentBlocks(), 1);

  // The store opens: the damage is counted, not fatal to the documents
  // around it.
  Open();
  EXPECT_GE(store().Stats().catalog_corruptions, 1);

  // Every record reads back whole or as DATA_LOSS naming its document.
  std::vector<std::string> damaged;
  std::vector<std::string> good;
  for (int i = 0; i < kDocuments; ++i) {
    absl::StatusOr<DocumentRecord> got = store().GetDocument({"t", Id(i)});
    if (got.ok()) {
      EXPECT_EQ(got->document_id, Id(i));
      good.push_back(Id(i));
      continue;
    }
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
    EXPECT_TRUE(absl::StrContains(got.status().message(),
                                  absl::StrCat("document t/", Id(i))))
        << got.status();
    damaged.push_back(Id(i));
  }
  ASSERT_FALSE(damaged.empty());
  ASSERT_FALSE(good.empty());  // one damaged block, not the whole family
  // Tokens live in another family and are intact.
  absl::StatusOr<std::vector<int32_t>> tokens =
      store().GetTokens({"t", damaged.front()});
  ASSERT_OK(tokens);
  EXPECT_EQ(*tokens, Tokens(10));

  absl::StatusOr<DocumentPage> page = store().ListDocuments("t", 1000, "");
  EXPECT_EQ(page.status().code(), absl::StatusCode::kDataLoss) << page.status();
  EXPECT_TRUE(
      absl::StrContains(page.status().message(), "list documents of tenant t"))
      << page.status();

  // Verify lists each damaged record by name (found through its tokens),
  // and the scan that the damage stopped, instead of failing.
  absl::StatusOr<VerifyReport> report = store().Verify({});
  ASSERT_OK(report);
  bool scan_reported = false;
  std::vector<std::string> reported;
  for (const BadValue& bad : report->bad) {
    EXPECT_EQ(bad.family, kDocumentsFamily) << bad.key << ": " << bad.reason;
    if (bad.key == "(scan)") {
      scan_reported = true;
    } else {
      reported.push_back(bad.key);
    }
  }
  EXPECT_TRUE(scan_reported);
  std::vector<std::string> expected;
  for (const std::string& id : damaged) expected.push_back("t/" + id);
  EXPECT_EQ(reported, expected);
  EXPECT_EQ(report->documents_checked, kDocuments);

  // The compaction that meets the damage fails and is counted as damage to
  // the truth, not to the cache.
  const StoreStats before = store().Stats();
  absl::StatusOr<CompactReport> compact = store().Compact();
  EXPECT_EQ(compact.status().code(), absl::StatusCode::kDataLoss)
      << compact.status();
  const StoreStats after = store().Stats();
  EXPECT_EQ(after.catalog_corruptions, before.catalog_corruptions + 1);
  EXPECT_EQ(after.corruptions, before.corruptions);
  // And its background error stays: with paranoid_checks RocksDB makes a
  // compaction corruption unrecoverable and refuses every write from then
  // on (until the store is reopened), where a suppressed one would let
  // this write through.
  const absl::Status put =
      store().PutDocument(Record("t", "after", {Key(1000)}), Tokens(10));
  EXPECT_EQ(put.code(), absl::StatusCode::kDataLoss) << put;
  // Reads go on.
  absl::StatusOr<DocumentRecord> still =
      store().GetDocument({"t", good.front()});
  EXPECT_OK(still);
}

}  // namespace
}  // namespace twice::storage
