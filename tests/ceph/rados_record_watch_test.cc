// RadosRecordWatch (through RadosDocumentCatalog) against the real local
// Ceph cluster of ctest's ceph_cluster fixture, with readers and writers
// on separate connections as separate processes would be:
//   - a write or delete from another connection has ended every mark of
//     its document when the writer's call returns (not eventually), while
//     marks of documents in other index objects stay trusted, and a mark
//     taken after the write is trusted again;
//   - without a write, trust ends once librados has not confirmed the
//     watch for the lease, and a mark ends at its maximum age or when its
//     watch is dropped to make room for another;
//   - a watcher that never acknowledges makes the writer wait out the
//     lease before it returns, and only then.
#include "storage/rados/rados_record_watch.h"

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "storage/rados/rados_document_catalog.h"
#include "storage/rados/rados_state_store.h"
#include "storage/rados/rados_store.h"
#include "tests/ceph/ceph_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

using std::chrono::milliseconds;
using test_util::ClusterConf;

// One connection to the cluster with its own catalog, as one process has.
struct Connection {
  std::unique_ptr<RadosCluster> cluster;
  std::unique_ptr<RadosStateStore> states;
  std::unique_ptr<RadosDocumentCatalog> catalog;
};

// A watch callback that never acknowledges a notify: a process that hangs.
class SilentWatcher final : public librados::WatchCtx2 {
 public:
  void handle_notify(uint64_t, uint64_t, uint64_t, ceph::bufferlist&) override {
  }
  void handle_error(uint64_t, int) override {}
};

class RadosRecordWatchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    prefix_ = "twice-test-watch-" + std::to_string(std::random_device{}());
  }

  void SetUp() override {
    ASSERT_FALSE(ClusterConf().empty())
        << "TWICE_CEPH_CONF is not set: run through ctest (fixture "
           "ceph_cluster)";
    tenant_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  Connection Connect(RecordWatchOptions watch_options = {}) {
    RadosOptions options;
    options.conf_file = ClusterConf();
    Connection connection;
    absl::StatusOr<std::unique_ptr<RadosCluster>> cluster =
        RadosCluster::Connect(options);
    EXPECT_OK(cluster);
    if (!cluster.ok()) return connection;
    connection.cluster = *std::move(cluster);
    absl::StatusOr<std::unique_ptr<RadosStateStore>> states =
        RadosStateStore::Open(*connection.cluster, prefix_ + "-states");
    EXPECT_OK(states);
    if (!states.ok()) return connection;
    connection.states = *std::move(states);
    absl::StatusOr<std::unique_ptr<RadosDocumentCatalog>> catalog =
        RadosDocumentCatalog::Open(*connection.cluster, prefix_ + "-meta",
                                   *connection.states, watch_options);
    EXPECT_OK(catalog);
    if (catalog.ok()) connection.catalog = *std::move(catalog);
    return connection;
  }

  // A connection that has written one 10-token document per id.
  Connection Writer(const std::vector<std::string>& ids,
                    RecordWatchOptions watch_options = {}) {
    Connection writer = Connect(watch_options);
    for (const std::string& id : ids) {
      if (writer.catalog == nullptr) break;
      EXPECT_OK(writer.catalog->PutDocument(Record(id), test_util::Tokens(10)));
    }
    return writer;
  }

  DocumentRecord Record(const std::string& id) const {
    return test_util::Record(tenant_, id, {});
  }
  DocumentRef Ref(const std::string& id) const { return {tenant_, id}; }

  // A document id whose record lives in another index object than `id`'s.
  std::string IdInAnotherBucket(const std::string& id) const {
    for (int i = 0;; ++i) {
      const std::string other = "other-" + std::to_string(i);
      if (IndexObjectName(tenant_, other) != IndexObjectName(tenant_, id)) {
        return other;
      }
    }
  }

  static inline std::string prefix_;
  std::string tenant_;
};

TEST_F(RadosRecordWatchTest, AWriteElsewhereEndsTheMarkBeforeItReturns) {
  const std::string other = IdInAnotherBucket("d");
  Connection writer = Writer({"d", other});
  Connection reader = Connect();
  ASSERT_NE(reader.catalog, nullptr);
  ASSERT_NE(writer.catalog, nullptr);

  RadosRecordWatch& watch = *reader.catalog->record_watch();
  ASSERT_OK_AND_ASSIGN(RecordWatch::Mark other_mark, watch.Begin(Ref(other)));
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    ASSERT_OK_AND_ASSIGN(RecordWatch::Mark mark, watch.Begin(Ref("d")));
    ASSERT_OK_AND_ASSIGN(DocumentRecord read,
                         reader.catalog->GetDocument(Ref("d")));
    EXPECT_TRUE(watch.Unchanged(mark));
    DocumentRecord pinned = read;
    pinned.pinned = !read.pinned;
    ASSERT_OK(writer.catalog->UpdateDocument(pinned));
    // At once: an ask that starts after the write returned must not trust
    // the record read before it.
    EXPECT_FALSE(watch.Unchanged(mark));
    EXPECT_TRUE(watch.Unchanged(other_mark));
  }
  ASSERT_OK_AND_ASSIGN(RecordWatch::Mark fresh, watch.Begin(Ref("d")));
  EXPECT_TRUE(watch.Unchanged(fresh));
  ASSERT_OK(writer.catalog->DeleteDocument(Ref("d")).status());
  EXPECT_FALSE(watch.Unchanged(fresh));
  EXPECT_TRUE(watch.Unchanged(other_mark));
  EXPECT_GE(watch.changes_seen(), 6);
  EXPECT_EQ(writer.catalog->record_watch()->unacknowledged_announcements(), 0);
}

TEST_F(RadosRecordWatchTest, TrustEndsWhenTheWatchGoesUnconfirmed) {
  // librados confirms a watch every few seconds (objecter_tick_interval);
  // with a lease far below that, trust must lapse between confirmations
  // although nothing was written.
  Connection writer = Writer({"d"});
  ASSERT_NE(writer.catalog, nullptr);
  RecordWatchOptions short_lease;
  short_lease.lease = milliseconds(100);
  Connection reader = Connect(short_lease);
  ASSERT_NE(reader.catalog, nullptr);
  RadosRecordWatch& watch = *reader.catalog->record_watch();
  ASSERT_OK_AND_ASSIGN(RecordWatch::Mark mark, watch.Begin(Ref("d")));
  bool lapsed = false;
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(3000);
  while (!lapsed && std::chrono::steady_clock::now() < deadline) {
    lapsed = !watch.Unchanged(mark);
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(lapsed);
}

TEST_F(RadosRecordWatchTest, AMarkEndsAtItsMaximumAge) {
  Connection writer = Writer({"d"});
  ASSERT_NE(writer.catalog, nullptr);
  RecordWatchOptions short_marks;
  short_marks.max_mark_age = milliseconds(300);
  Connection reader = Connect(short_marks);
  ASSERT_NE(reader.catalog, nullptr);
  RadosRecordWatch& watch = *reader.catalog->record_watch();
  ASSERT_OK_AND_ASSIGN(RecordWatch::Mark mark, watch.Begin(Ref("d")));
  EXPECT_TRUE(watch.Unchanged(mark));
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_FALSE(watch.Unchanged(mark));
  // A new mark of the same watch is trusted again.
  ASSERT_OK_AND_ASSIGN(RecordWatch::Mark again, watch.Begin(Ref("d")));
  EXPECT_TRUE(watch.Unchanged(again));
}

TEST_F(RadosRecordWatchTest, AWatchDroppedForRoomEndsItsMarks) {
  const std::string other = IdInAnotherBucket("d");
  Connection writer = Writer({"d", other});
  ASSERT_NE(writer.catalog, nullptr);
  RecordWatchOptions one_watch;
  one_watch.max_watches = 1;
  Connection reader = Connect(one_watch);
  ASSERT_NE(reader.catalog, nullptr);
  RadosRecordWatch& watch = *reader.catalog->record_watch();
  ASSERT_OK_AND_ASSIGN(RecordWatch::Mark first, watch.Begin(Ref("d")));
  ASSERT_OK_AND_ASSIGN(RecordWatch::Mark second, watch.Begin(Ref(other)));
  EXPECT_FALSE(watch.Unchanged(first));
  EXPECT_TRUE(watch.Unchanged(second));
  // Watched again: a new registration, trusted; the older mark stays ended.
  ASSERT_OK_AND_ASSIGN(RecordWatch::Mark again, watch.Begin(Ref("d")));
  EXPECT_TRUE(watch.Unchanged(again));
  EXPECT_FALSE(watch.Unchanged(first));
  EXPECT_FALSE(watch.Unchanged(second));
  // The dropped watch gets no notifies: a write to it costs no wait.
  ASSERT_OK_AND_ASSIGN(DocumentRecord read,
                       writer.catalog->GetDocument(Ref(other)));
  read.pinned = true;
  ASSERT_OK(writer.catalog->UpdateDocument(read));
  EXPECT_EQ(writer.catalog->record_watch()->unacknowledged_announcements(), 0);
}

TEST_F(RadosRecordWatchTest, ASilentWatcherMakesTheWriterWaitOutTheLease) {
  RecordWatchOptions options;
  options.notify_timeout = milliseconds(1000);  // librados' least
  options.lease = milliseconds(700);
  Connection writer = Writer({"d"}, options);
  ASSERT_NE(writer.catalog, nullptr);
  RadosRecordWatch& announcer = *writer.catalog->record_watch();
  EXPECT_EQ(announcer.unacknowledged_announcements(), 0);

  Connection hung = Connect();
  ASSERT_NE(hung.catalog, nullptr);
  SilentWatcher silent;
  uint64_t handle = 0;
  ASSERT_EQ(hung.catalog->pool().watch2(IndexObjectName(tenant_, "d"), &handle,
                                        &silent),
            0);
  ASSERT_OK_AND_ASSIGN(DocumentRecord read,
                       writer.catalog->GetDocument(Ref("d")));
  read.pinned = true;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_OK(writer.catalog->UpdateDocument(read));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, options.notify_timeout + options.lease);
  EXPECT_EQ(announcer.unacknowledged_announcements(), 1);
  // The write itself committed.
  ASSERT_OK_AND_ASSIGN(DocumentRecord after,
                       writer.catalog->GetDocument(Ref("d")));
  EXPECT_TRUE(after.pinned);

  // Once the silent watch is gone, writes no longer wait.
  ASSERT_EQ(hung.catalog->pool().unwatch2(handle), 0);
  hung.cluster->FlushWatchCallbacks();
  after.pinned = false;
  ASSERT_OK(writer.catalog->UpdateDocument(after));
  EXPECT_EQ(announcer.unacknowledged_announcements(), 1);
}

}  // namespace
}  // namespace twice::storage
