// ParseWeightIndex: the shard map of model.safetensors.index.json, parsed
// from bytes (the parser the weight_index_fuzz target drives).
#include <map>
#include <string>

#include "absl/status/status.h"
#include "engine/weights/weight_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::HasSubstr;

TEST(WeightIndexTest, ParsesShardNames) {
  auto shards = ParseWeightIndex(
      R"({"metadata": {"total_size": 8},
          "weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}})",
      "dir/model.safetensors.index.json");
  ASSERT_OK(shards);
  EXPECT_EQ(*shards,
            (std::map<std::string, std::string>{{"a", "model-1.safetensors"},
                                                {"b", "model-2.safetensors"}}));
}

TEST(WeightIndexTest, RejectsMalformedIndexesNamingThePath) {
  for (const char* json :
       {"", "[]", "{", "{\"weight_map\": []}", "{\"weight_map\": {\"a\": 1}}",
        "{\"weight_map\": {\"a\": \"\"}}", "{\"weight_map\": {\"a\": \".\"}}",
        "{\"weight_map\": {\"a\": \"..\"}}",
        "{\"weight_map\": {\"a\": \"../x.safetensors\"}}",
        "{\"weight_map\": {\"a\": \"/etc/x\"}}", "\xff\xfe{}"}) {
    auto shards = ParseWeightIndex(json, "idx.json");
    ASSERT_FALSE(shards.ok()) << json;
    EXPECT_EQ(shards.status().code(), absl::StatusCode::kInvalidArgument)
        << json;
    EXPECT_THAT(shards.status().message(), HasSubstr("idx.json")) << json;
  }
}

}  // namespace
}  // namespace twice::engine
