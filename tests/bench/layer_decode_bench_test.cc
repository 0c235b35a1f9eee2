// The layer-level decode benchmark on a small width: one row per layer and
// position, batches as asked, states of the size each layer's cache has at
// that position (attention: a K and V row per token; RAT: per closed chunk,
// plus its open chunk), and ratios taken against the attention row.
#include "bench/layer_decode_bench.h"

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::bench {
namespace {

TEST(LayerDecodeBenchTest, RowsPerLayerAndPositionWithTheirCacheSizes) {
  LayerDecodeOptions options;
  options.dim = 64;
  options.heads = 4;
  options.rat_groups = 2;
  options.chunk_sizes = {4, 16};
  options.positions = {64, 256};
  options.batch_tokens = 512;
  options.steps = 2;
  absl::StatusOr<std::vector<LayerDecodeRow>> rows =
      RunLayerDecodeBench(options);
  ASSERT_OK(rows);
  ASSERT_EQ(rows->size(), 6u);
  for (size_t i = 0; i < rows->size(); ++i) {
    const LayerDecodeRow& r = (*rows)[i];
    const int64_t position = i < 3 ? 64 : 256;
    EXPECT_EQ(r.position, position);
    EXPECT_EQ(r.batch, 512 / position);
    EXPECT_GT(r.step_ms, 0);
    EXPECT_NEAR(r.tokens_per_second, r.batch * 1000.0 / r.step_ms, 1e-6);
    const int64_t kv_row = 2 * 64 * 4;  // K and V, f32
    if (i % 3 == 0) {
      EXPECT_EQ(r.layer, "attention");
      EXPECT_EQ(r.vs_attention, 1.0);
      // Grown to the position, before the timed steps added theirs.
      EXPECT_GE(r.state_bytes, position * kv_row);
      EXPECT_LT(r.state_bytes, (position + 64) * kv_row);
    } else {
      EXPECT_EQ(r.layer, "rat");
      const int64_t chunk = i % 3 == 1 ? 4 : 16;
      EXPECT_EQ(r.chunk, chunk);
      EXPECT_GE(r.state_bytes, position / chunk * kv_row);
      EXPECT_LT(r.state_bytes, (position / chunk + 8) * kv_row);
      const LayerDecodeRow& attention = (*rows)[i - i % 3];
      EXPECT_NEAR(r.vs_attention,
                  r.tokens_per_second / attention.tokens_per_second, 1e-9);
    }
  }
  const std::string table = FormatLayerDecodeRows(*rows, false);
  EXPECT_NE(table.find("x attention"), std::string::npos);
  EXPECT_NE(
      FormatLayerDecodeRows(*rows, true).find("\"kind\":\"layer_decode\""),
      std::string::npos);
}

TEST(LayerDecodeBenchTest, RefusesShapesTheLayersCannotTake) {
  LayerDecodeOptions options;
  options.dim = 64;
  options.heads = 5;
  EXPECT_TRUE(absl::IsInvalidArgument(RunLayerDecodeBench(options).status()));
  options.heads = 4;
  options.chunk_sizes = {0};
  EXPECT_TRUE(absl::IsInvalidArgument(RunLayerDecodeBench(options).status()));
}

}  // namespace
}  // namespace twice::bench
