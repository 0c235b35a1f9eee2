// PrefillRun over a real RocksDB store and a real (random-weight) Based
// model: chain keys, reuse of stored segments, and recompute of a skipped
// segment whose state turns out to be corrupt.
#include "services/prefill/prefill_run.h"

#include <numeric>

#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "engine/state/state_codec.h"
#include "gtest/gtest.h"
#include "services/common/state_io.h"
#include "storage/rocksdb_store.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"

namespace twice::services {
namespace {

class PrefillRunTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new testing::TempDir();
    engine::InitModelOptions options;
    options.out_dir = model_dir_->path();
    ASSERT_OK(engine::WriteRandomModel(options));
    auto model = engine::LoadModel(model_dir_->path());
    ASSERT_OK(model);
    model_ = model->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete model_dir_;
  }

  void SetUp() override {
    storage::RocksDbStoreOptions options;
    options.path = dir_.path();
    options.sync_writes = false;
    auto store = storage::OpenRocksDbStore(options);
    ASSERT_OK(store);
    store_ = *std::move(store);
    tokens_.resize(3 * kSegment);
    std::iota(tokens_.begin(), tokens_.end(), 100);
  }

  absl::Span<const int32_t> Segment(int i) const {
    return absl::MakeConstSpan(tokens_).subspan(i * kSegment, kSegment);
  }

  PrefillRunOptions Options() const {
    PrefillRunOptions options;
    options.tenant = "tenant";
    return options;
  }

  static constexpr int kSegment = 24;
  static testing::TempDir* model_dir_;
  static engine::Model* model_;
  testing::TempDir dir_;
  std::unique_ptr<storage::Store> store_;
  std::vector<int32_t> tokens_;
};

testing::TempDir* PrefillRunTest::model_dir_ = nullptr;
engine::Model* PrefillRunTest::model_ = nullptr;

TEST_F(PrefillRunTest, SegmentsChainAndAreReusedByKey) {
  const storage::StateKey root =
      storage::RootKey(model_->description().fingerprint, "causal", "tenant");
  PrefillRun first(*model_, *store_, Options());
  storage::StateKey expected = root;
  for (int i = 0; i < 3; ++i) {
    auto result = first.RunSegment(Segment(i));
    ASSERT_OK(result);
    expected = storage::ChainKey(expected, Segment(i));
    EXPECT_EQ(result->key, expected);
    EXPECT_FALSE(result->reused);
  }
  EXPECT_EQ(first.tokens_computed(), 3 * kSegment);
  auto state = LoadState(*store_, *model_, expected);
  ASSERT_OK(state);
  EXPECT_EQ((*state)->token_count(), 3 * kSegment);

  PrefillRun again(*model_, *store_, Options());
  for (int i = 0; i < 3; ++i) {
    auto result = again.RunSegment(Segment(i));
    ASSERT_OK(result);
    EXPECT_TRUE(result->reused);
  }
  EXPECT_EQ(again.tokens_computed(), 0);
  EXPECT_EQ(again.current_key(), expected);
}

TEST_F(PrefillRunTest, CorruptSkippedStateIsRecomputedFromTheLastGoodOne) {
  std::vector<storage::StateKey> keys;
  {
    PrefillRun run(*model_, *store_, Options());
    for (int i = 0; i < 2; ++i) keys.push_back(run.RunSegment(Segment(i))->key);
  }
  // The second state is stored but corrupt; the third segment is new.
  auto blob = store_->GetState(keys[1]);
  ASSERT_OK(blob);
  std::string corrupt = *blob;
  corrupt[corrupt.size() / 3] ^= 0x01;
  ASSERT_OK(store_->PutState(keys[1], corrupt, {}));

  PrefillRun run(*model_, *store_, Options());
  EXPECT_TRUE(run.RunSegment(Segment(0))->reused);
  EXPECT_TRUE(run.RunSegment(Segment(1))->reused);
  auto third = run.RunSegment(Segment(2));
  ASSERT_OK(third);
  EXPECT_FALSE(third->reused);
  EXPECT_EQ(run.states_recomputed(), 1);
  // Recomputed from the root: both skipped segments were read again.
  EXPECT_EQ(run.tokens_computed(), 3 * kSegment);
  auto state = LoadState(*store_, *model_, third->key);
  ASSERT_OK(state);
  EXPECT_EQ((*state)->token_count(), 3 * kSegment);
}

TEST_F(PrefillRunTest, MissingParentIsNotFound) {
  PrefillRunOptions options = Options();
  options.parent = storage::RootKey("no", "such", "state");
  PrefillRun run(*model_, *store_, options);
  EXPECT_EQ(run.RunSegment(Segment(0)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(PrefillRunTest, OutOfVocabularyTokenIsInvalidArgument) {
  PrefillRun run(*model_, *store_, Options());
  std::vector<int32_t> bad = {1, 2, model_->description().padded_vocab_size};
  EXPECT_EQ(run.RunSegment(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::services
