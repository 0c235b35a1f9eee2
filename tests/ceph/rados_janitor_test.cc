// RadosJanitor against ctest's local Ceph cluster, each test on its own
// pools: one janitor holds the lease and the other waits (and takes over
// within the lease when the active process is killed), garbage past the
// grace period (unnamed states, blocks and parts, uncommitted tokens) goes
// while everything a record names stays, the budget
// evicts the cheapest unpinned state first, and verify finds and deletes a
// damaged state.
#include "storage/rados/rados_janitor.h"

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "storage/rados/rados_layout.h"
#include "storage/rados/rados_objects.h"
#include "storage/state_value.h"
#include "tests/ceph/ceph_test_util.h"
#include "tests/testing/server_process.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

using test_util::ClusterConf;

class RadosJanitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(ClusterConf().empty())
        << "TWICE_CEPH_CONF is not set: run through ctest (fixture "
           "ceph_cluster)";
    options_.cluster.conf_file = ClusterConf();
    options_.pool_prefix =
        "twice-test-janitor-" + std::to_string(std::random_device{}());
    ASSERT_OK_AND_ASSIGN(store_, OpenRadosStore(options_));
    ASSERT_OK_AND_ASSIGN(cluster_, RadosCluster::Connect(options_.cluster));
    ASSERT_OK_AND_ASSIGN(states_,
                         cluster_->OpenPool(RadosStatesPool(options_), false));
    ASSERT_OK_AND_ASSIGN(meta_,
                         cluster_->OpenPool(RadosMetaPool(options_), false));
  }

  std::unique_ptr<RadosJanitor> Janitor(JanitorOptions options) {
    absl::StatusOr<std::unique_ptr<RadosJanitor>> janitor =
        RadosJanitor::Open(options_, options);
    EXPECT_OK(janitor);
    return janitor.ok() ? *std::move(janitor) : nullptr;
  }
  // A pass of a janitor that treats everything as old enough.
  JanitorReport Pass(JanitorOptions options = {}) {
    options.grace = std::chrono::seconds(0);
    std::unique_ptr<RadosJanitor> janitor = Janitor(options);
    EXPECT_NE(janitor, nullptr);
    if (janitor == nullptr) return {};
    absl::StatusOr<bool> held = janitor->Acquire();
    EXPECT_OK(held);
    EXPECT_TRUE(held.ok() && *held);
    absl::StatusOr<JanitorReport> report = janitor->RunPass();
    EXPECT_OK(report);
    return report.ok() ? *report : JanitorReport{};
  }

  static StateKey Key(int i) {
    return ChainKey(RootKey("fp", "recurrent", "t"), {i});
  }
  void PutState(const StateKey& key, size_t bytes, int64_t recompute) {
    PutStateOptions options;
    options.tenant = "t";
    options.recompute_tokens = recompute;
    ASSERT_OK(store_->PutState(key, test_util::RandomBytes(bytes, 7), options));
  }
  void PutDoc(const std::string& id, const std::vector<StateKey>& keys,
              bool pinned = false) {
    ASSERT_OK(store_->PutDocument(test_util::Record("t", id, keys, pinned),
                                  test_util::Tokens(10 * keys.size())));
  }
  bool Has(const StateKey& key) {
    absl::StatusOr<bool> has = store_->HasState(key);
    EXPECT_OK(has);
    return has.ok() && *has;
  }

  RadosStoreOptions options_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<RadosCluster> cluster_;
  librados::IoCtx states_;
  librados::IoCtx meta_;
};

TEST_F(RadosJanitorTest, OneJanitorHoldsTheLeaseAndTheOtherWaits) {
  JanitorOptions options;
  options.lease = std::chrono::seconds(30);
  std::unique_ptr<RadosJanitor> first = Janitor(options);
  std::unique_ptr<RadosJanitor> second = Janitor(options);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  ASSERT_OK_AND_ASSIGN(bool first_holds, first->Acquire());
  EXPECT_TRUE(first_holds);
  ASSERT_OK_AND_ASSIGN(bool second_holds, second->Acquire());
  EXPECT_FALSE(second_holds);
  EXPECT_EQ(second->RunPass().status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Renewing is taking it again.
  ASSERT_OK_AND_ASSIGN(first_holds, first->Acquire());
  EXPECT_TRUE(first_holds);
  ASSERT_OK(first->RunPass().status());
  // A janitor that stops releases the lock: no wait for the lease.
  first.reset();
  ASSERT_OK_AND_ASSIGN(second_holds, second->Acquire());
  EXPECT_TRUE(second_holds);
}

TEST_F(RadosJanitorTest, AKilledJanitorsLeaseRunsOutAndTheStandbyTakesOver) {
  // Two janitor processes; the active one dies without releasing.
  testing::TempDir dir;
  const std::vector<std::string> flags = {
      "--role=janitor",
      "--store=rados",
      "--rados-conf=" + ClusterConf(),
      "--rados-pool-prefix=" + options_.pool_prefix,
      "--janitor-lease-seconds=4",
      "--janitor-interval-seconds=1"};
  testing::ServerProcess janitors[2];
  ASSERT_TRUE(janitors[0].Start(flags, dir.path() + "/janitor0.log"))
      << janitors[0].stderr_text();
  auto wait_for = [](testing::ServerProcess& process, const std::string& what,
                     std::chrono::seconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      if (process.stderr_text().find(what) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  ASSERT_TRUE(wait_for(janitors[0], "janitor.pass", std::chrono::seconds(20)))
      << janitors[0].stderr_text();
  ASSERT_TRUE(janitors[1].Start(flags, dir.path() + "/janitor1.log"))
      << janitors[1].stderr_text();
  ASSERT_TRUE(
      wait_for(janitors[1], "janitor.waiting", std::chrono::seconds(20)));
  // Still waiting a lease later: the active one keeps renewing.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  EXPECT_EQ(janitors[1].stderr_text().find("janitor.active"),
            std::string::npos);
  const auto killed = std::chrono::steady_clock::now();
  janitors[0].Kill();
  ASSERT_TRUE(wait_for(janitors[1], "janitor.pass", std::chrono::seconds(20)))
      << janitors[1].stderr_text();
  // The lease (4 s) plus the standby's poll (0.4 s) and a pass.
  EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds(8));
  EXPECT_EQ(janitors[1].Stop(), 0);
}

TEST_F(RadosJanitorTest, GarbageGoesAndWhatARecordNamesStays) {
  PutState(Key(1), 1000, 10);  // named
  PutState(Key(2), 1000, 10);  // named by no record
  // A chunked state a record names, and one deleted, leaving its blocks.
  const std::string_view blocks[] = {"block zero", "block one"};
  PutStateOptions put;
  put.tenant = "t";
  ASSERT_OK(store_->PutStateBlocks(Key(3), std::nullopt, blocks, put));
  ASSERT_OK(store_->PutStateBlocks(Key(4), std::nullopt, blocks, put));
  ASSERT_OK(store_->DeleteState(Key(4)));
  PutDoc("d", {Key(1), Key(3)});
  // The tokens of a write that never committed.
  ASSERT_OK(PutImmutableObject(
      meta_, "t.0123456789abcdef", "tokens",
      {{"twice.tenant", "t"},
       {"twice.written_unix_ms", std::to_string(UnixMillisNow())}}));

  // A part of a striped value whose head was never written.
  ASSERT_OK(PutImmutableObject(
      states_, PartObjectName(StateObjectName(Key(9)), 1), "part",
      {{"twice.written_unix_ms", std::to_string(UnixMillisNow())}}));

  // And a part of a striped tokens object whose head is gone.
  ASSERT_OK(PutImmutableObject(
      meta_, PartObjectName("t.fedcba9876543210", 1), "tokens part",
      {{"twice.written_unix_ms", std::to_string(UnixMillisNow())}}));

  // Within the grace period nothing goes.
  {
    std::unique_ptr<RadosJanitor> janitor = Janitor({});
    ASSERT_NE(janitor, nullptr);
    ASSERT_OK_AND_ASSIGN(bool held, janitor->Acquire());
    ASSERT_TRUE(held);
    ASSERT_OK_AND_ASSIGN(JanitorReport young, janitor->RunPass());
    EXPECT_EQ(young.orphan_states + young.orphan_blocks + young.orphan_tokens,
              0);
    EXPECT_EQ(young.documents, 1);
    EXPECT_EQ(young.states, 3);
    EXPECT_EQ(young.blocks, 4);
  }
  const JanitorReport report = Pass();
  EXPECT_EQ(report.orphan_states, 1);
  EXPECT_EQ(report.orphan_blocks, 3);  // two blocks and the part
  EXPECT_EQ(report.orphan_tokens, 2);  // the uncommitted write, the part
  EXPECT_TRUE(Has(Key(1)));
  EXPECT_FALSE(Has(Key(2)));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> read,
                       store_->GetStateBlocks(Key(3)));
  EXPECT_EQ(read.size(), 2u);
  ASSERT_OK(store_->GetTokens({"t", "d"}).status());
  // Nothing is left to collect.
  const JanitorReport again = Pass();
  EXPECT_EQ(again.orphan_states + again.orphan_blocks + again.orphan_tokens, 0);
}

TEST_F(RadosJanitorTest, TheBudgetEvictsTheCheapestUnpinnedStateFirst) {
  PutState(Key(1), 100000, 1);      // pinned, and the cheapest
  PutState(Key(2), 100000, 5);      // cheap to recompute
  PutState(Key(3), 100000, 50000);  // costly to recompute
  PutDoc("pinned", {Key(1)}, /*pinned=*/true);
  PutDoc("plain", {Key(2), Key(3)});
  JanitorOptions options;
  options.state_budget_bytes = 250000;
  const JanitorReport report = Pass(options);
  EXPECT_EQ(report.pinned_states, 1);
  EXPECT_EQ(report.evicted_states, 1);
  EXPECT_GT(report.evicted_bytes, 100000);
  EXPECT_LE(report.state_bytes, 250000);
  EXPECT_TRUE(Has(Key(1)));
  EXPECT_FALSE(Has(Key(2)));
  EXPECT_TRUE(Has(Key(3)));
}

TEST_F(RadosJanitorTest, VerifyDeletesADamagedStateAndReportsADamagedRecord) {
  PutState(Key(1), 5000, 10);
  PutState(Key(2), 5000, 10);
  PutDoc("d", {Key(1), Key(2)});
  PutDoc("e", {Key(1)});
  ceph::bufferlist garbage;
  garbage.append(test_util::RandomBytes(5000, 3));
  ASSERT_EQ(states_.write_full(StateObjectName(Key(2)), garbage), 0);
  librados::ObjectWriteOperation damage;
  ceph::bufferlist bad;
  bad.append("not a record");
  damage.omap_set({{"r.e", bad}});
  ASSERT_EQ(meta_.operate(IndexObjectName("t", "e"), &damage), 0);

  JanitorOptions options;
  options.verify = true;
  const JanitorReport report = Pass(options);
  EXPECT_EQ(report.bad_states, 1);
  EXPECT_EQ(report.bad_records, 1);
  EXPECT_EQ(report.bad_tokens, 0);
  EXPECT_TRUE(Has(Key(1)));
  EXPECT_FALSE(Has(Key(2)));
}

}  // namespace
}  // namespace twice::storage
