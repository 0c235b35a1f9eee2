// State blocks (engine/state/state_blocks.h) on real states: a tiny random
// RAT-SWA model (`init-model --arch=rat --preset=tiny-swa`: a chunk-KV
// layer and a sliding-window layer, chunk L 16) prefills a sequence in
// segments, each segment's state encoded as the blocks that extend the
// previous one, the way the store chains them. The reference is the
// whole-state codec (state_codec.h): decoding the chained blocks must give
// the very bytes EncodeState gives for the state (bit-identical, no
// tolerance), and the decoded state must continue exactly like it.
// Truncated, flipped, missing, reordered or forged blocks are DATA_LOSS and
// leave the target untouched; another model's blocks are
// FAILED_PRECONDITION.
#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/layers/rat_chunk_kv_state.h"
#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "engine/state/state_blocks.h"
#include "engine/state/state_codec.h"
#include "gtest/gtest.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using absl::StatusCode;
using testing::RandomTokens;
using testing::TempDir;

constexpr int kBlockCodecVocab = 300;
constexpr int64_t kChunk = 16;  // the tiny preset's L
// Segment ends: off and on chunk edges, one segment that closes no chunk
// (40 -> 41) and one that closes several.
const std::vector<size_t> kEnds = {7, 16, 40, 41, 90, 150, 230};

std::unique_ptr<Model> WriteAndLoad(const TempDir& tmp, const std::string& name,
                                    const std::string& arch,
                                    const std::string& preset, uint64_t seed) {
  const std::string tok = tmp.Sub(name + ".tokenizer.json");
  testing::WriteFileOrFail(tok, testing::SmallTokenizerJson(kBlockCodecVocab));
  InitModelOptions options;
  options.architecture = arch;
  options.preset = preset;
  options.out_dir = tmp.Sub(name);
  options.tokenizer_json = tok;
  options.seed = seed;
  const absl::Status written = WriteRandomModel(options);
  EXPECT_OK(written);
  return written.ok() ? testing::LoadOrDie(options.out_dir) : nullptr;
}

// Re-seals a block after a test rewrote its bytes (so that only the field
// under test is wrong, not the checksum).
void Reseal(std::string& block) {
  const uint64_t sum = XXH3_64bits(block.data(), block.size() - 8);
  std::memcpy(block.data() + block.size() - 8, &sum, 8);
}

class StateBlockCodecTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    model_ = WriteAndLoad(*tmp_, "rat", "rat", "tiny-swa", 3).release();
    other_ = WriteAndLoad(*tmp_, "rat2", "rat", "tiny-swa", 4).release();
  }
  static void TearDownTestSuite() {
    delete other_;
    delete model_;
    delete tmp_;
  }
  void SetUp() override {
    ASSERT_NE(model_, nullptr);
    ASSERT_NE(other_, nullptr);
  }

  // Prefills kEnds segment by segment; `chain` gets the blocks as the
  // store lists them, `states` the state after each segment and
  // `new_bytes` the bytes each segment's blocks add.
  struct Chain {
    std::vector<std::string> blocks;
    std::vector<std::unique_ptr<SequenceState>> states;
    std::vector<size_t> list_sizes;  // blocks listed after each segment
    std::vector<int64_t> new_bytes;
  };
  static Chain BuildChain(const Model& model,
                          const std::vector<int32_t>& tokens) {
    Chain chain;
    auto state = model.NewState();
    std::vector<int64_t> base;  // nothing stored yet
    size_t begin = 0;
    for (size_t end : kEnds) {
      auto logits =
          model.Prefill(absl::MakeConstSpan(tokens).subspan(begin, end - begin),
                        *state, PrefillMode::kCausal);
      EXPECT_OK(logits);
      auto blocks = EncodeStateBlocks(*state, base);
      EXPECT_OK(blocks);
      int64_t bytes = 0;
      for (std::string& b : *blocks) {
        bytes += static_cast<int64_t>(b.size());
        chain.blocks.push_back(std::move(b));
      }
      chain.new_bytes.push_back(bytes);
      chain.list_sizes.push_back(chain.blocks.size());
      chain.states.push_back(state->Clone());
      base = StateRowCounts(*state);
      begin = end;
    }
    return chain;
  }

  static TempDir* tmp_;
  static Model* model_;
  static Model* other_;
};

TempDir* StateBlockCodecTest::tmp_ = nullptr;
Model* StateBlockCodecTest::model_ = nullptr;
Model* StateBlockCodecTest::other_ = nullptr;

const RatChunkKvState& RatLayer(const SequenceState& s) {
  return dynamic_cast<const RatChunkKvState&>(s.layer(0));
}

// Growing layers (RAT's chunk KV, a full KV cache) are block rows; models
// whose states are all fixed-size are stored whole.
TEST_F(StateBlockCodecTest, OnlyModelsWithGrowingLayersHaveBlockRows) {
  EXPECT_TRUE(HasBlockRows(*model_->NewState()));
  TempDir tmp;
  auto based = WriteAndLoad(tmp, "based", "based", "tiny", 1);
  ASSERT_NE(based, nullptr);
  EXPECT_FALSE(HasBlockRows(*based->NewState()));
  auto llama = WriteAndLoad(tmp, "llama", "llama", "tiny", 1);
  ASSERT_NE(llama, nullptr);
  EXPECT_TRUE(HasBlockRows(*llama->NewState()));
  auto mamba2 = WriteAndLoad(tmp, "mamba2", "mamba2", "tiny", 1);
  ASSERT_NE(mamba2, nullptr);
  EXPECT_FALSE(HasBlockRows(*mamba2->NewState()));
}

TEST_F(StateBlockCodecTest, EveryPrefixOfTheChainDecodesToItsState) {
  const std::vector<int32_t> tokens = RandomTokens(230, kBlockCodecVocab, 11);
  const Chain chain = BuildChain(*model_, tokens);
  for (size_t i = 0; i < kEnds.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "after " << kEnds[i] << " tokens");
    const SequenceState& want = *chain.states[i];
    EXPECT_EQ(RatLayer(want).closed_chunks(),
              static_cast<int64_t>(kEnds[i]) / kChunk);
    auto got = model_->NewState();
    ASSERT_TRUE(
        DecodeStateBlocksInto(
            absl::MakeConstSpan(chain.blocks).subspan(0, chain.list_sizes[i]),
            *got)
            .ok());
    EXPECT_EQ(got->token_count(), static_cast<int64_t>(kEnds[i]));
    EXPECT_EQ(EncodeState(*got), EncodeState(want));  // bit-identical
  }
  // A segment that closes no chunk writes only a head.
  EXPECT_EQ(chain.list_sizes[3] - chain.list_sizes[2], 1u);
  // The first segment (7 tokens) closes none either.
  EXPECT_EQ(chain.list_sizes[0], 1u);
}

TEST_F(StateBlockCodecTest, DecodedStateContinuesExactly) {
  const std::vector<int32_t> tokens = RandomTokens(230, kBlockCodecVocab, 12);
  const Chain chain = BuildChain(*model_, tokens);
  auto decoded = model_->NewState();
  ASSERT_OK(DecodeStateBlocksInto(chain.blocks, *decoded));
  auto original = chain.states.back()->Clone();
  const std::vector<int32_t> more = RandomTokens(40, kBlockCodecVocab, 13);
  auto a = model_->Prefill(more, *original, PrefillMode::kCausal);
  auto b = model_->Prefill(more, *decoded, PrefillMode::kCausal);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_EQ(*a, *b);
  for (int32_t t : {5, 17, 200}) {
    auto sa = model_->Step(t, *original);
    auto sb = model_->Step(t, *decoded);
    ASSERT_OK(sa);
    ASSERT_OK(sb);
    EXPECT_EQ(*sa, *sb);
  }
}

TEST_F(StateBlockCodecTest, AnExtensionWritesItsNewRowsAndAHead) {
  const std::vector<int32_t> tokens = RandomTokens(230, kBlockCodecVocab, 14);
  const Chain chain = BuildChain(*model_, tokens);
  const SequenceState& last = *chain.states.back();
  const int64_t row_bytes = RatLayer(last).row_bytes();
  for (size_t i = 1; i < kEnds.size(); ++i) {
    // The head: everything but the closed chunks (the window ring, counts,
    // the open chunk) and its framing.
    const SequenceState& s = *chain.states[i];
    auto head_only = EncodeStateBlocks(s, StateRowCounts(s));
    ASSERT_OK(head_only);
    ASSERT_EQ(head_only->size(), 1u);
    const int64_t head = static_cast<int64_t>(head_only->front().size());
    const int64_t new_rows = static_cast<int64_t>(kEnds[i]) / kChunk -
                             static_cast<int64_t>(kEnds[i - 1]) / kChunk;
    const int64_t extra = chain.new_bytes[i] - head - new_rows * row_bytes;
    // The rows block's framing (magic, version, kind, length, fingerprint,
    // entry header, checksum), or nothing when no chunk closed.
    if (new_rows == 0) {
      EXPECT_EQ(extra, 0) << i;
    } else {
      EXPECT_GT(extra, 0) << i;
      EXPECT_LE(extra, 200) << i;
    }
    const int64_t whole = static_cast<int64_t>(EncodeState(s).size());
    std::printf("after %3zu tokens: whole state %6lld B, extension %6lld B\n",
                kEnds[i], static_cast<long long>(whole),
                static_cast<long long>(chain.new_bytes[i]));
  }
  // Starting over (no base) writes every row once.
  auto fresh = EncodeStateBlocks(last, {});
  ASSERT_OK(fresh);
  ASSERT_EQ(fresh->size(), 2u);
  EXPECT_GE(static_cast<int64_t>((*fresh)[0].size()),
            RatLayer(last).closed_chunks() * row_bytes);
  auto decoded = model_->NewState();
  ASSERT_OK(DecodeStateBlocksInto(*fresh, *decoded));
  EXPECT_EQ(EncodeState(*decoded), EncodeState(last));
}

TEST_F(StateBlockCodecTest, AWholeStateIsOneBlock) {
  auto state = model_->NewState();
  ASSERT_TRUE(model_
                  ->Prefill(RandomTokens(50, kBlockCodecVocab, 15), *state,
                            PrefillMode::kCausal)
                  .ok());
  auto decoded = model_->NewState();
  ASSERT_OK(DecodeStateBlocksInto({EncodeState(*state)}, *decoded));
  EXPECT_EQ(EncodeState(*decoded), EncodeState(*state));
}

TEST_F(StateBlockCodecTest, BadBaseRowsAreInvalidArgument) {
  auto state = model_->NewState();
  ASSERT_TRUE(model_
                  ->Prefill(RandomTokens(50, kBlockCodecVocab, 16), *state,
                            PrefillMode::kCausal)
                  .ok());
  std::vector<int64_t> rows = StateRowCounts(*state);
  ASSERT_EQ(rows[0], 3);
  rows[0] = 4;  // more rows than the state holds
  EXPECT_EQ(EncodeStateBlocks(*state, rows).status().code(),
            StatusCode::kInvalidArgument);
  rows[0] = -1;
  EXPECT_EQ(EncodeStateBlocks(*state, rows).status().code(),
            StatusCode::kInvalidArgument);
  rows = {0};  // wrong layer count
  EXPECT_EQ(EncodeStateBlocks(*state, rows).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(StateBlockCodecTest, DamagedBlocksAreDataLossAndLeaveTheTarget) {
  const std::vector<int32_t> tokens = RandomTokens(230, kBlockCodecVocab, 17);
  const Chain chain = BuildChain(*model_, tokens);
  auto target = model_->NewState();
  const std::string before = EncodeState(*target);
  auto expect_loss = [&](const std::vector<std::string>& blocks,
                         const std::string& what) {
    auto t = model_->NewState();
    const absl::Status s = DecodeStateBlocksInto(blocks, *t);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << what << ": " << s;
    EXPECT_EQ(EncodeState(*t), before) << what;
  };
  expect_loss({}, "no blocks");
  for (size_t b = 0; b < chain.blocks.size(); ++b) {
    const std::string& block = chain.blocks[b];
    for (size_t n : {size_t{0}, size_t{3}, size_t{19}, size_t{27},
                     block.size() / 2, block.size() - 1}) {
      std::vector<std::string> cut = chain.blocks;
      cut[b] = block.substr(0, n);
      expect_loss(cut, absl::StrCat("block ", b, " cut to ", n));
    }
    for (size_t at : {size_t{0}, size_t{5}, size_t{8}, size_t{12},
                      block.size() / 2, block.size() - 1}) {
      std::vector<std::string> flipped = chain.blocks;
      flipped[b][at] ^= 0x10;
      expect_loss(flipped, absl::StrCat("block ", b, " flipped at ", at));
    }
    std::vector<std::string> longer = chain.blocks;
    longer[b] += '\0';
    expect_loss(longer, absl::StrCat("block ", b, " with a trailing byte"));
  }
  // Structure: a rows block missing, two swapped, the head missing.
  size_t rows_block = chain.list_sizes[1] - 2;  // the 2nd segment's rows
  std::vector<std::string> missing = chain.blocks;
  missing.erase(missing.begin() + static_cast<std::ptrdiff_t>(rows_block));
  expect_loss(missing, "a rows block missing");
  std::vector<std::string> swapped = chain.blocks;
  std::swap(swapped[rows_block], swapped[chain.list_sizes[4] - 2]);
  expect_loss(swapped, "rows blocks swapped");
  std::vector<std::string> headless = chain.blocks;
  headless.pop_back();
  expect_loss(headless, "no head at the end");
  std::vector<std::string> twice_rows = chain.blocks;
  twice_rows.insert(twice_rows.end() - 1, chain.blocks[rows_block]);
  expect_loss(twice_rows, "a rows block repeated");
}

// Blocks rewritten with valid checksums: sizes and counts are validated
// before anything is allocated or read.
TEST_F(StateBlockCodecTest, ForgedSizesAreDataLossNotAllocations) {
  const std::vector<int32_t> tokens = RandomTokens(60, kBlockCodecVocab, 18);
  auto state = model_->NewState();
  ASSERT_OK(model_->Prefill(tokens, *state, PrefillMode::kCausal));
  auto blocks = EncodeStateBlocks(*state, {});
  ASSERT_OK(blocks);
  ASSERT_EQ(blocks->size(), 2u);
  const size_t fp = state->fingerprint().size();
  // Rows body: string fingerprint | u32 entries | u32 layer | i64 first |
  // i64 rows | u64 bytes.
  const size_t entries_at = 20 + 4 + fp;
  const size_t rows_at = entries_at + 4 + 4 + 8;
  const size_t bytes_at = rows_at + 8;
  auto forge = [&](size_t block, size_t at, int64_t value) {
    std::vector<std::string> forged = *blocks;
    std::memcpy(forged[block].data() + at, &value, sizeof(value));
    Reseal(forged[block]);
    auto t = model_->NewState();
    return DecodeStateBlocksInto(forged, *t).code();
  };
  EXPECT_EQ(forge(0, 12, int64_t{1} << 60), StatusCode::kDataLoss);  // body
  EXPECT_EQ(forge(0, rows_at, int64_t{1} << 60), StatusCode::kDataLoss);
  EXPECT_EQ(forge(0, rows_at, -1), StatusCode::kDataLoss);
  EXPECT_EQ(forge(0, bytes_at, int64_t{1} << 62), StatusCode::kDataLoss);
  EXPECT_EQ(forge(0, rows_at - 8, 1), StatusCode::kDataLoss);  // first row
  {
    std::vector<std::string> forged = *blocks;
    const uint32_t entries = 0x7fffffff;
    std::memcpy(forged[0].data() + entries_at, &entries, 4);
    Reseal(forged[0]);
    auto t = model_->NewState();
    EXPECT_EQ(DecodeStateBlocksInto(forged, *t).code(), StatusCode::kDataLoss);
  }
  {
    std::vector<std::string> forged = *blocks;
    const uint32_t version = 2;
    std::memcpy(forged[1].data() + 4, &version, 4);
    Reseal(forged[1]);
    auto t = model_->NewState();
    EXPECT_EQ(DecodeStateBlocksInto(forged, *t).code(), StatusCode::kDataLoss);
  }
  // Head body: string fingerprint | string dtype | i64 token count | u32
  // layers | string kind | i64 rows.
  const size_t head_rows_at =
      20 + 4 + fp + 4 + 3 + 8 + 4 + 4 + RatChunkKvState::kKind.size();
  EXPECT_EQ(forge(1, head_rows_at, int64_t{1} << 60), StatusCode::kDataLoss);
  EXPECT_EQ(forge(1, head_rows_at, 2), StatusCode::kDataLoss);  // holds 3
  EXPECT_EQ(forge(1, head_rows_at, -1), StatusCode::kDataLoss);
  // The chunk-KV head's own token count (after the row count and the
  // section length) beyond the rows held.
  EXPECT_EQ(forge(1, head_rows_at + 16, int64_t{1} << 40),
            StatusCode::kDataLoss);
  // Sanity: the offsets above point at what they claim.
  EXPECT_EQ(forge(1, head_rows_at, 3), StatusCode::kOk);
  EXPECT_EQ(forge(0, rows_at, 3), StatusCode::kOk);
}

TEST_F(StateBlockCodecTest, AnotherModelsBlocksAreFailedPrecondition) {
  const std::vector<int32_t> tokens = RandomTokens(230, kBlockCodecVocab, 19);
  const Chain chain = BuildChain(*other_, tokens);
  auto target = model_->NewState();
  EXPECT_EQ(DecodeStateBlocksInto(chain.blocks, *target).code(),
            StatusCode::kFailedPrecondition);
  // Blocks of two models mixed in one list: the rows do not belong.
  const Chain mine = BuildChain(*model_, tokens);
  std::vector<std::string> mixed = mine.blocks;
  const size_t rows_block = mine.list_sizes[1] - 2;  // the 2nd segment's rows
  mixed[rows_block] = chain.blocks[rows_block];
  EXPECT_EQ(DecodeStateBlocksInto(mixed, *target).code(),
            StatusCode::kDataLoss);
}

}  // namespace
}  // namespace twice::engine
