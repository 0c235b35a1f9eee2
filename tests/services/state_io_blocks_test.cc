// SaveState / LoadState / PrefillRun with a chunk-KV (RAT) model over a
// real RocksDB store: segment states are stored as blocks that extend the
// previous segment's, load back bit-identical to the engine's own
// segment-by-segment prefill, fall back to every block when the base is
// gone, and a state whose blocks the codec rejects is deleted and reported
// NOT_FOUND (counted as a corruption) so the caller recomputes it.
#include <memory>
#include <string>
#include <vector>

#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "engine/state/state_blocks.h"
#include "engine/state/state_codec.h"
#include "gtest/gtest.h"
#include "services/common/state_io.h"
#include "services/prefill/prefill_run.h"
#include "storage/rocksdb_state_store.h"
#include "storage/rocksdb_store.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"

namespace twice::services {
namespace {

std::vector<int32_t> Tokens(int n, int offset) {
  std::vector<int32_t> out(n);
  for (int i = 0; i < n; ++i) out[i] = (offset + 37 * i) % 50000;
  return out;
}

class StateIoBlocksTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    engine::InitModelOptions options;
    options.architecture = "rat";
    options.preset = "tiny";
    options.out_dir = dir_->path() + "/rat";
    ASSERT_OK(engine::WriteRandomModel(options));
    auto model = engine::LoadModel(options.out_dir);
    ASSERT_OK(model);
    model_ = model->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete dir_;
  }
  void SetUp() override {
    storage::RocksDbStoreOptions options;
    options.path = store_dir_.path() + "/db";
    options.sync_writes = false;
    auto store = storage::OpenRocksDbStore(options);
    ASSERT_OK(store);
    store_ = *std::move(store);
  }

  static testing::TempDir* dir_;
  static engine::Model* model_;
  testing::TempDir store_dir_;
  std::unique_ptr<storage::Store> store_;
};

testing::TempDir* StateIoBlocksTest::dir_ = nullptr;
engine::Model* StateIoBlocksTest::model_ = nullptr;

TEST_F(StateIoBlocksTest, PrefillRunStoresSegmentsAsExtendingBlocks) {
  const std::vector<int32_t> tokens = Tokens(150, 3);
  const std::vector<size_t> ends = {40, 41, 100, 150};
  PrefillRunOptions options;
  options.tenant = "t";
  PrefillRun run(*model_, *store_, options);
  auto engine_state = model_->NewState();
  size_t begin = 0;
  int64_t blocks_before = store_->Stats().block_count;
  for (size_t end : ends) {
    SCOPED_TRACE(end);
    const auto span = absl::MakeConstSpan(tokens).subspan(begin, end - begin);
    auto result = run.RunSegment(span);
    ASSERT_OK(result);
    ASSERT_TRUE(
        model_->Prefill(span, *engine_state, engine::PrefillMode::kCausal)
            .ok());
    // The first segment writes rows + head; later ones their new rows (if
    // a chunk closed) and a head.
    const bool closed_chunks = end / 16 > begin / 16;
    const int64_t blocks = store_->Stats().block_count;
    EXPECT_EQ(blocks - blocks_before, closed_chunks ? 2 : 1);
    blocks_before = blocks;
    auto loaded = LoadState(*store_, *model_, result->key);
    ASSERT_OK(loaded);
    EXPECT_EQ(engine::EncodeState(**loaded),
              engine::EncodeState(*engine_state));
    auto listed = store_->GetStateBlocks(result->key);
    ASSERT_OK(listed);
    begin = end;
  }
  auto listed = store_->GetStateBlocks(run.current_key());
  ASSERT_OK(listed);
  EXPECT_EQ(listed->size(), 7u);  // rows+head, head, rows+head, rows+head
}

TEST_F(StateIoBlocksTest, PrefillRunCountsItsStatesAgainstItsTenant) {
  testing::TempDir dir;
  storage::RocksDbStoreOptions store_options;
  store_options.path = dir.path() + "/db";
  store_options.sync_writes = false;
  store_options.tenant_state_budget_bytes = int64_t{1} << 30;
  auto store = storage::RocksDbStateStore::Open(store_options);
  ASSERT_OK(store);
  PrefillRunOptions options;
  options.tenant = "t";
  PrefillRun run(*model_, **store, options);
  const std::vector<int32_t> tokens = Tokens(60, 3);
  ASSERT_OK(run.RunSegment(absl::MakeConstSpan(tokens).subspan(0, 40)));
  ASSERT_OK(run.RunSegment(absl::MakeConstSpan(tokens).subspan(40)));
  const storage::StoreStats stats = (*store)->Stats();
  EXPECT_GT(stats.block_count, 0);
  EXPECT_EQ((*store)->TenantStateBytes("t"), stats.state_bytes);
}

TEST_F(StateIoBlocksTest, MissingBaseWritesEveryBlock) {
  auto state = model_->NewState();
  ASSERT_TRUE(
      model_->Prefill(Tokens(70, 5), *state, engine::PrefillMode::kCausal)
          .ok());
  const storage::StateKey key =
      storage::ChainKey(storage::RootKey("fp", "causal", "t"), Tokens(70, 5));
  const storage::StateKey gone = storage::ChainKey(key, Tokens(1, 1));
  ASSERT_TRUE(
      SaveState(*store_, key, *state, "t", StateBase{gone, {2, 2}}).ok());
  auto blocks = store_->GetStateBlocks(key);
  ASSERT_OK(blocks);
  EXPECT_EQ(blocks->size(), 2u);
  auto loaded = LoadState(*store_, *model_, key);
  ASSERT_OK(loaded);
  EXPECT_EQ(engine::EncodeState(**loaded), engine::EncodeState(*state));
}

TEST_F(StateIoBlocksTest, BlocksTheCodecRejectsAreDeletedAndMissed) {
  auto state = model_->NewState();
  ASSERT_TRUE(
      model_->Prefill(Tokens(70, 6), *state, engine::PrefillMode::kCausal)
          .ok());
  const storage::StateKey key =
      storage::ChainKey(storage::RootKey("fp", "causal", "t"), Tokens(70, 6));
  auto blocks = engine::EncodeStateBlocks(*state, {});
  ASSERT_OK(blocks);
  // Intact envelopes, a damaged payload (the store cannot tell).
  (*blocks)[0][40] ^= 1;
  const std::vector<std::string_view> views(blocks->begin(), blocks->end());
  ASSERT_OK(store_->PutStateBlocks(key, std::nullopt, views, {}));
  const int64_t corruptions = store_->Stats().corruptions;
  auto loaded = LoadState(*store_, *model_, key);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound)
      << loaded.status();
  EXPECT_EQ(store_->Stats().corruptions, corruptions + 1);
  auto has = store_->HasState(key);
  ASSERT_OK(has);
  EXPECT_FALSE(*has);
}

}  // namespace
}  // namespace twice::services
