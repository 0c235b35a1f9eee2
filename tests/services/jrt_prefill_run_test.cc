// PrefillRun in prefix mode over a real RocksDB store and the tiny random
// JRT model (encoder length 64): the first read from the chain root is the
// prefix, later segments are causal, a run from a parent is causal, and a
// skipped prefix segment that must be recomputed is re-encoded from the
// root with the same result.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "gtest/gtest.h"
#include "services/common/state_io.h"
#include "services/prefill/prefill_run.h"
#include "storage/rocksdb_store.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"

namespace twice::services {
namespace {

constexpr int kEncoder = 64;

double MaxError(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(double{got[i]} - want[i]) -
                                1e-4 * std::abs(double{want[i]}));
  }
  return worst;
}

class JrtPrefillRunTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new testing::TempDir();
    engine::InitModelOptions options;
    options.architecture = "jrt";
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
    tokens_.resize(150);
    std::iota(tokens_.begin(), tokens_.end(), 500);
  }

  absl::Span<const int32_t> Tokens(int begin, int end) const {
    return absl::MakeConstSpan(tokens_).subspan(begin, end - begin);
  }

  PrefillRunOptions Options() const {
    PrefillRunOptions options;
    options.tenant = "tenant";
    options.mode = engine::PrefillMode::kPrefix;
    return options;
  }

  // Logits of one step after the stored state `key`.
  std::vector<float> StepAfter(const storage::StateKey& key) {
    auto state = LoadState(*store_, *model_, key);
    EXPECT_OK(state);
    auto logits = model_->Step(7, **state);
    EXPECT_OK(logits);
    return *logits;
  }

  // The same from a direct prefix read of tokens [0, n).
  std::vector<float> StepAfterPrefix(int n) {
    auto state = model_->NewState();
    EXPECT_TRUE(
        model_->Prefill(Tokens(0, n), *state, engine::PrefillMode::kPrefix)
            .ok());
    auto logits = model_->Step(7, *state);
    EXPECT_OK(logits);
    return *logits;
  }

  static testing::TempDir* model_dir_;
  static engine::Model* model_;
  testing::TempDir dir_;
  std::unique_ptr<storage::Store> store_;
  std::vector<int32_t> tokens_;
};

testing::TempDir* JrtPrefillRunTest::model_dir_ = nullptr;
engine::Model* JrtPrefillRunTest::model_ = nullptr;

TEST_F(JrtPrefillRunTest, FirstSegmentIsThePrefixTheRestIsCausal) {
  PrefillRun run(*model_, *store_, Options());
  const storage::StateKey root =
      storage::RootKey(model_->description().fingerprint, "prefix", "tenant");
  auto first = run.RunSegment(Tokens(0, 70));
  ASSERT_OK(first);
  EXPECT_EQ(first->key, storage::ChainKey(root, Tokens(0, 70)));
  auto second = run.RunSegment(Tokens(70, 100));
  ASSERT_OK(second);
  EXPECT_LE(MaxError(StepAfter(second->key), StepAfterPrefix(100)), 2e-5);

  // A short whole document: padded to the encoder; its token count says so.
  PrefillRun short_run(*model_, *store_, Options());
  auto only = short_run.RunSegment(Tokens(0, 10));
  ASSERT_OK(only);
  auto state = LoadState(*store_, *model_, only->key);
  ASSERT_OK(state);
  EXPECT_EQ((*state)->token_count(), kEncoder);
  EXPECT_EQ(short_run.tokens_computed(), 10);
}

TEST_F(JrtPrefillRunTest, SkippedPrefixSegmentsAreReencodedFromTheRoot) {
  std::vector<storage::StateKey> keys;
  {
    PrefillRun run(*model_, *store_, Options());
    keys.push_back(run.RunSegment(Tokens(0, 70))->key);
    keys.push_back(run.RunSegment(Tokens(70, 100))->key);
  }
  // The second state is stored but corrupt; the third segment is new. The
  // run skips both stored segments, finds the second corrupt when it needs
  // it, and reads all 100 pending tokens again from the root: one prefix
  // read, whose encoder is still the first 64 tokens.
  auto blob = store_->GetState(keys[1]);
  ASSERT_OK(blob);
  std::string corrupt = *blob;
  corrupt[corrupt.size() / 3] ^= 0x01;
  ASSERT_OK(store_->PutState(keys[1], corrupt, {}));

  PrefillRun run(*model_, *store_, Options());
  EXPECT_TRUE(run.RunSegment(Tokens(0, 70))->reused);
  EXPECT_TRUE(run.RunSegment(Tokens(70, 100))->reused);
  auto third = run.RunSegment(Tokens(100, 150));
  ASSERT_OK(third);
  EXPECT_FALSE(third->reused);
  EXPECT_EQ(run.states_recomputed(), 1);
  EXPECT_EQ(run.tokens_computed(), 150);
  EXPECT_LE(MaxError(StepAfter(third->key), StepAfterPrefix(150)), 2e-5);
}

TEST_F(JrtPrefillRunTest, RunsFromAParentAreCausal) {
  PrefillRunOptions causal = Options();
  causal.mode = engine::PrefillMode::kCausal;
  PrefillRun base(*model_, *store_, causal);
  auto parent = base.RunSegment(Tokens(0, 20));
  ASSERT_OK(parent);
  PrefillRunOptions options = Options();
  options.parent = parent->key;
  PrefillRun run(*model_, *store_, options);
  auto result = run.RunSegment(Tokens(20, 40));
  ASSERT_OK(result);
  auto state = model_->NewState();
  ASSERT_TRUE(
      model_->Prefill(Tokens(0, 40), *state, engine::PrefillMode::kCausal)
          .ok());
  auto want = model_->Step(7, *state);
  ASSERT_OK(want);
  EXPECT_LE(MaxError(StepAfter(result->key), *want), 2e-5);
}

}  // namespace
}  // namespace twice::services
