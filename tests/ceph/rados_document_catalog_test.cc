// RadosDocumentCatalog (through the RADOS Store) against the real local
// Ceph cluster of ctest's ceph_cluster fixture: conditional writes commit
// once per revision, listings page over every bucket in id order, a delete
// removes exactly the states no other record names, replaced tokens go, and
// a damaged record or lost tokens object is DATA_LOSS, never served (a
// record can be repaired by a write of any revision). Each test uses its
// own tenant, so tests share one pair of pools.
#include "storage/rados/rados_document_catalog.h"

#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "storage/rados/rados_objects.h"
#include "storage/rados/rados_store.h"
#include "tests/ceph/ceph_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

using test_util::ClusterConf;

class RadosDocumentCatalogTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    prefix_ = "twice-test-catalog-" + std::to_string(std::random_device{}());
  }

  void SetUp() override {
    ASSERT_FALSE(ClusterConf().empty())
        << "TWICE_CEPH_CONF is not set: run through ctest (fixture "
           "ceph_cluster)";
    options_.cluster.conf_file = ClusterConf();
    options_.pool_prefix = prefix_;
    ASSERT_OK_AND_ASSIGN(store_, OpenRadosStore(options_));
    ASSERT_OK_AND_ASSIGN(cluster_, RadosCluster::Connect(options_.cluster));
    ASSERT_OK_AND_ASSIGN(meta_,
                         cluster_->OpenPool(RadosMetaPool(options_), false));
    tenant_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  StateKey Key(int i) const {
    return ChainKey(RootKey("fp", "recurrent", tenant_), {i});
  }
  static std::vector<int32_t> Tokens(int64_t n, int32_t salt = 0) {
    std::vector<int32_t> tokens(n);
    for (int64_t i = 0; i < n; ++i)
      tokens[i] = static_cast<int32_t>(i * 7 + salt);
    return tokens;
  }
  DocumentRecord Record(const std::string& id,
                        const std::vector<StateKey>& keys) const {
    return test_util::Record(tenant_, id, keys);
  }
  void PutState(const StateKey& key) {
    PutStateOptions options;
    options.tenant = tenant_;
    ASSERT_OK(store_->PutState(key, "state bytes", options));
  }
  bool Has(const StateKey& key) {
    absl::StatusOr<bool> has = store_->HasState(key);
    EXPECT_OK(has);
    return has.ok() && *has;
  }
  // Tokens objects of this test's tenant in the meta pool.
  std::vector<std::string> TokensObjects() {
    std::vector<std::string> found;
    for (auto it = meta_.nobjects_begin(); it != meta_.nobjects_end(); ++it) {
      if (it->get_oid().rfind("t.", 0) != 0) continue;
      absl::StatusOr<ObjectAttributes> attributes =
          ReadAttributes(meta_, it->get_oid());
      if (attributes.ok() && (*attributes)["twice.tenant"] == tenant_) {
        found.push_back(it->get_oid());
      }
    }
    return found;
  }
  // Overwrites one omap value of the document's index object, as damage
  // (or a tool writing by hand) would.
  void OverwriteIndexValue(const std::string& key, const std::string& value) {
    librados::ObjectWriteOperation op;
    ceph::bufferlist bytes;
    bytes.append(value);
    op.omap_set({{key, bytes}});
    ASSERT_EQ(meta_.operate(IndexObjectName(tenant_, "d"), &op), 0);
  }

  static inline std::string prefix_;
  RadosStoreOptions options_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<RadosCluster> cluster_;
  librados::IoCtx meta_;
  std::string tenant_;
};

TEST_F(RadosDocumentCatalogTest, WritesAreConditionalOnTheRevision) {
  DocumentRecord record = Record("d", {Key(1)});
  ASSERT_OK(store_->PutDocument(record, Tokens(10)));
  ASSERT_OK_AND_ASSIGN(DocumentRecord first,
                       store_->GetDocument({tenant_, "d"}));
  EXPECT_EQ(first.revision, 1);
  EXPECT_EQ(first.segments.size(), 1u);
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> tokens,
                       store_->GetTokens({tenant_, "d"}));
  EXPECT_EQ(tokens, Tokens(10));
  // A second create, and a write made from a stale read, change nothing.
  EXPECT_EQ(store_->PutDocument(record, Tokens(10)).code(),
            absl::StatusCode::kAborted);
  DocumentRecord pinned = first;
  pinned.pinned = true;
  ASSERT_OK(store_->UpdateDocument(pinned));
  DocumentRecord stale = first;
  stale.accessed_unix_ms = 99;
  EXPECT_EQ(store_->UpdateDocument(stale).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(store_->PutDocument(stale, Tokens(10)).code(),
            absl::StatusCode::kAborted);
  ASSERT_OK_AND_ASSIGN(DocumentRecord second,
                       store_->GetDocument({tenant_, "d"}));
  EXPECT_EQ(second.revision, 2);
  EXPECT_TRUE(second.pinned);
  EXPECT_EQ(second.accessed_unix_ms, first.accessed_unix_ms);
  // UpdateDocument keeps the tokens; a new token count needs PutDocument.
  DocumentRecord longer = second;
  longer.token_count = 20;
  EXPECT_EQ(store_->UpdateDocument(longer).code(),
            absl::StatusCode::kInvalidArgument);
  // A write made before a delete does not re-create the document.
  ASSERT_OK(store_->DeleteDocument({tenant_, "d"}).status());
  EXPECT_EQ(store_->PutDocument(second, Tokens(10)).code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(store_->GetDocument({tenant_, "d"}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetTokens({tenant_, "d"}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->UpdateDocument(second).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->DeleteDocument({tenant_, "d"}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(TokensObjects().empty());
}

TEST_F(RadosDocumentCatalogTest, ConcurrentWritersFromOneRevisionCommitOnce) {
  ASSERT_OK(store_->PutDocument(Record("d", {Key(1)}), Tokens(10)));
  ASSERT_OK_AND_ASSIGN(DocumentRecord base,
                       store_->GetDocument({tenant_, "d"}));
  const int committed = test_util::RaceWritersFromOneRevision(8, [&](int i) {
    DocumentRecord mine = base;
    mine.accessed_unix_ms = 1000 + i;
    // Half replace the tokens too, so both write paths race.
    return i % 2 == 0 ? store_->UpdateDocument(mine)
                      : store_->PutDocument(mine, Tokens(10, i));
  });
  ASSERT_NE(committed, -1);
  ASSERT_OK_AND_ASSIGN(DocumentRecord after,
                       store_->GetDocument({tenant_, "d"}));
  EXPECT_EQ(after.revision, 2);
  EXPECT_EQ(after.accessed_unix_ms, 1000 + committed);
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> tokens,
                       store_->GetTokens({tenant_, "d"}));
  EXPECT_EQ(tokens, Tokens(10, committed % 2 == 0 ? 0 : committed));
  // The losers' tokens objects are gone; only the committed one is left.
  EXPECT_EQ(TokensObjects().size(), 1u);
}

TEST_F(RadosDocumentCatalogTest, ListingPagesOverEveryBucketInIdOrder) {
  std::set<std::string> ids;
  for (int i = 0; i < 37; ++i) {
    const std::string id = "doc-" + std::to_string(1000 + i * 13 % 37);
    ids.insert(id);
    ASSERT_OK(store_->PutDocument(Record(id, {Key(i)}), Tokens(10)));
  }
  // Another tenant's documents are not listed.
  DocumentRecord other = Record("doc-1005", {});
  other.tenant = tenant_ + "-other";
  ASSERT_OK(store_->PutDocument(other, Tokens(10)));

  std::vector<std::string> listed;
  std::string token;
  int pages = 0;
  do {
    ASSERT_OK_AND_ASSIGN(DocumentPage page,
                         store_->ListDocuments(tenant_, 5, token));
    EXPECT_LE(page.records.size(), 5u);
    for (const DocumentRecord& record : page.records) {
      EXPECT_EQ(record.tenant, tenant_);
      listed.push_back(record.document_id);
    }
    token = page.next_page_token;
    ++pages;
  } while (!token.empty() && pages < 20);
  EXPECT_EQ(listed, std::vector<std::string>(ids.begin(), ids.end()));
  EXPECT_EQ(pages, 8);
  EXPECT_EQ(store_->ListDocuments(tenant_, -1, "").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RadosDocumentCatalogTest, DeleteRemovesOnlyStatesNoOtherRecordNames) {
  for (int i = 1; i <= 4; ++i) PutState(Key(i));
  ASSERT_OK(store_->PutDocument(Record("a", {Key(1), Key(2)}), Tokens(20)));
  ASSERT_OK(store_->PutDocument(Record("b", {Key(2), Key(3)}), Tokens(20)));
  ASSERT_OK_AND_ASSIGN(int64_t deleted, store_->DeleteDocument({tenant_, "a"}));
  EXPECT_EQ(deleted, 1);
  EXPECT_FALSE(Has(Key(1)));
  EXPECT_TRUE(Has(Key(2)));
  // A rewrite that stops naming a state drops its ref: deleting b then
  // leaves the state the rewrite dropped alone (no record names it, but it
  // was not b's any more), and deletes the ones it names.
  ASSERT_OK_AND_ASSIGN(DocumentRecord b, store_->GetDocument({tenant_, "b"}));
  DocumentRecord rewritten = Record("b", {Key(2), Key(4)});
  rewritten.revision = b.revision;
  ASSERT_OK(store_->PutDocument(rewritten, Tokens(20)));
  ASSERT_OK_AND_ASSIGN(deleted, store_->DeleteDocument({tenant_, "b"}));
  EXPECT_EQ(deleted, 2);
  EXPECT_FALSE(Has(Key(2)));
  EXPECT_TRUE(Has(Key(3)));
  EXPECT_FALSE(Has(Key(4)));
  EXPECT_TRUE(TokensObjects().empty());
}

TEST_F(RadosDocumentCatalogTest, ADamagedRecordIsDataLossAndARewriteRepairs) {
  PutState(Key(1));
  ASSERT_OK(store_->PutDocument(Record("d", {Key(1)}), Tokens(10)));
  OverwriteIndexValue("r.d", "not a record");
  const absl::Status lost = store_->GetDocument({tenant_, "d"}).status();
  EXPECT_EQ(lost.code(), absl::StatusCode::kDataLoss) << lost;
  EXPECT_NE(lost.message().find("document " + tenant_ + "/d"),
            std::string::npos)
      << lost;
  EXPECT_EQ(store_->ListDocuments(tenant_, 0, "").status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_GE(store_->Stats().catalog_corruptions, 2);
  // The truth (tokens) is intact, and a write of any revision replaces the
  // record; the state the damaged record named is known from its ref.
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> tokens,
                       store_->GetTokens({tenant_, "d"}));
  EXPECT_EQ(tokens, Tokens(10));
  DocumentRecord repaired = Record("d", {Key(2)});
  repaired.revision = 5;
  ASSERT_OK(store_->PutDocument(repaired, Tokens(10)));
  ASSERT_OK_AND_ASSIGN(DocumentRecord back,
                       store_->GetDocument({tenant_, "d"}));
  EXPECT_EQ(back.revision, 6);
  ASSERT_OK_AND_ASSIGN(int64_t deleted, store_->DeleteDocument({tenant_, "d"}));
  EXPECT_EQ(deleted, 0);     // Key(2) was never stored
  EXPECT_TRUE(Has(Key(1)));  // no longer named by d: left to the janitor
}

TEST_F(RadosDocumentCatalogTest, LostOrDamagedTokensAreDataLoss) {
  ASSERT_OK(store_->PutDocument(Record("d", {Key(1)}), Tokens(10)));
  const std::vector<std::string> objects = TokensObjects();
  ASSERT_EQ(objects.size(), 1u);
  ceph::bufferlist garbage;
  garbage.append("garbage garbage garbage");
  ASSERT_EQ(meta_.write_full(objects[0], garbage), 0);
  EXPECT_EQ(store_->GetTokens({tenant_, "d"}).status().code(),
            absl::StatusCode::kDataLoss);
  ASSERT_EQ(meta_.remove(objects[0]), 0);
  const absl::Status missing = store_->GetTokens({tenant_, "d"}).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kDataLoss) << missing;
  EXPECT_NE(missing.message().find("missing"), std::string::npos) << missing;
}

TEST_F(RadosDocumentCatalogTest, ATenantSeesOnlyItsOwnDocuments) {
  ASSERT_OK(store_->PutDocument(Record("d", {Key(1)}), Tokens(10)));
  const DocumentRef other{tenant_ + "-b", "d"};
  EXPECT_EQ(store_->GetDocument(other).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetTokens(other).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->DeleteDocument(other).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(DocumentPage page,
                       store_->ListDocuments(other.tenant, 0, ""));
  EXPECT_TRUE(page.records.empty());
  EXPECT_EQ(store_->GetDocument({"", "d"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK(store_->GetDocument({tenant_, "d"}).status());
}

}  // namespace
}  // namespace twice::storage
