// The catalog's conditional writes (document_catalog.h): a record commits
// only over the revision it was read at, so writers through several
// orchestrator replicas never lose each other's changes.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/storage/store_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

using test_util::Key;
using test_util::Record;
using test_util::Tokens;

using DocumentRevisionTest = test_util::StoreFixture;

TEST_F(DocumentRevisionTest, DocumentWritesAreConditionalOnTheRevision) {
  Open();
  DocumentRecord record = Record("t", "d", {Key(1)});
  ASSERT_OK(store().PutDocument(record, Tokens(10)));
  ASSERT_OK_AND_ASSIGN(DocumentRecord first, store().GetDocument({"t", "d"}));
  EXPECT_EQ(first.revision, 1);
  // A second create, and a write made from a stale read, change nothing.
  EXPECT_EQ(store().PutDocument(record, Tokens(10)).code(),
            absl::StatusCode::kAborted);
  DocumentRecord pinned = first;
  pinned.pinned = true;
  ASSERT_OK(store().UpdateDocument(pinned));
  DocumentRecord stale = first;
  stale.accessed_unix_ms = 99;
  const absl::Status lost = store().UpdateDocument(stale);
  EXPECT_EQ(lost.code(), absl::StatusCode::kAborted) << lost;
  EXPECT_NE(lost.message().find("another writer"), std::string::npos) << lost;
  EXPECT_EQ(store().PutDocument(stale, Tokens(10)).code(),
            absl::StatusCode::kAborted);
  ASSERT_OK_AND_ASSIGN(DocumentRecord second, store().GetDocument({"t", "d"}));
  EXPECT_EQ(second.revision, 2);
  EXPECT_TRUE(second.pinned);
  EXPECT_EQ(second.accessed_unix_ms, first.accessed_unix_ms);
  // The revision survives a reopen; a deleted document is not re-created
  // by a write made before the delete.
  Close();
  Open();
  ASSERT_OK_AND_ASSIGN(DocumentRecord reopened,
                       store().GetDocument({"t", "d"}));
  EXPECT_EQ(reopened.revision, 2);
  ASSERT_OK(store().DeleteDocument({"t", "d"}).status());
  EXPECT_EQ(store().PutDocument(reopened, Tokens(10)).code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(store().GetDocument({"t", "d"}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(DocumentRevisionTest, ConcurrentWritersFromOneRevisionCommitOnce) {
  Open();
  PutDoc(Record("t", "d", {Key(1)}));
  ASSERT_OK_AND_ASSIGN(DocumentRecord base, store().GetDocument({"t", "d"}));
  const int committed = test_util::RaceWritersFromOneRevision(8, [&](int i) {
    DocumentRecord mine = base;
    mine.accessed_unix_ms = 1000 + i;
    return store().UpdateDocument(mine);
  });
  ASSERT_NE(committed, -1);
  ASSERT_OK_AND_ASSIGN(DocumentRecord after, store().GetDocument({"t", "d"}));
  EXPECT_EQ(after.accessed_unix_ms, 1000 + committed);
  EXPECT_EQ(after.revision, base.revision + 1);
}

}  // namespace
}  // namespace twice::storage
