// Model fingerprint (design §3): hex SHA-256 over, in order, the
// architecture name, the canonical config JSON, every weight (canonical name,
// dtype, shape, stored bytes) in name order, the tokenizer.json bytes and the
// state dtype, then the weights' load dtype when the load converts any
// tensor (WeightMap::matrix_dtype; states of an f32 and a bf16 load never
// mix, while a load as stored hashes as before). Every field is length-prefixed
// so no two inputs collide by concatenation. A state carries its model's
// fingerprint and is refused by any other model.
#ifndef TWICE_ENGINE_MODELS_FINGERPRINT_H_
#define TWICE_ENGINE_MODELS_FINGERPRINT_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

[[nodiscard]] absl::StatusOr<std::string> ModelFingerprint(
    std::string_view architecture, std::string_view canonical_config,
    const WeightMap& weights, std::string_view tokenizer_json,
    std::string_view state_dtype);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_FINGERPRINT_H_
