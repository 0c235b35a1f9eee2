// EngineCost for Mamba-2 against the reference's numbers (§1.2 of the
// architecture notes): the mamba2-130m shape has 3,765,320 parameters per
// layer and 128,989,632 in all (tied, vocabulary 50277 padded to 50288).
#include "bench/engine_cost.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::bench {
namespace {

constexpr char k130m[] = R"({"d_model": 768, "d_intermediate": 0,
  "n_layer": 24, "vocab_size": 50277, "ssm_cfg": {"layer": "Mamba2"},
  "rms_norm": true, "pad_vocab_size_multiple": 16, "tie_embeddings": true})";

TEST(Mamba2CostTest, WeightsMatchTheCheckpoint) {
  absl::StatusOr<EngineCost> cost = EngineCost::FromConfigJson(k130m);
  ASSERT_OK(cost);
  EXPECT_EQ(cost->weight_bytes(), int64_t{4} * 128989632);
  EXPECT_EQ(cost->decode_weight_bytes(), cost->weight_bytes());
  EXPECT_FALSE(cost->is_jrt());
  EXPECT_EQ(cost->ReadTokens(2048), 2048);
}

TEST(Mamba2CostTest, PrefillFlopsByHand) {
  absl::StatusOr<EngineCost> cost = EngineCost::FromConfigJson(k130m);
  ASSERT_OK(cost);
  // 2048 tokens = 8 chunks of 256.
  const double t = 2048, tri = 8.0 * 256 * 257;
  const double layer = 2 * t * 768 * 3352 + 2 * t * 1536 * 768 +
                       2 * 4 * 1792 * t + 128 * tri + 24 * 64 * tri +
                       4 * t * 24 * 64 * 128;
  EXPECT_DOUBLE_EQ(cost->PrefillFlops(2048), 24 * layer + 2.0 * 768 * 50288);
  // A ragged tail: one chunk of 256 plus 4 tokens.
  EXPECT_GT(cost->PrefillFlops(260), cost->PrefillFlops(256));
}

}  // namespace
}  // namespace twice::bench
