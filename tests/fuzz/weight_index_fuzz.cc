// Fuzzes the model.safetensors.index.json parser (ParseWeightIndex): any
// accepted shard name must be a plain file name of the model directory.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/weights/weight_map.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  auto shards = twice::engine::ParseWeightIndex(json, "fuzz.index.json");
  if (!shards.ok()) return 0;
  for (const auto& [name, shard] : *shards) {
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." ||
        shard == "..") {
      twice::fuzz::Die("accepted shard name '" + shard + "'");
    }
  }
  return 0;
}
