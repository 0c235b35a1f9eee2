// Typed, bounds-checked reads of config.json fields, shared by the Llama and
// RAT config parsers. Every failure is INVALID_ARGUMENT naming the key, so a
// bad config never turns into a bad allocation.
#ifndef TWICE_ENGINE_CONFIG_JSON_FIELDS_H_
#define TWICE_ENGINE_CONFIG_JSON_FIELDS_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace twice::engine::config {

using Json = nlohmann::json;

// Bounds no real model reaches; they keep a hostile config from asking for
// absurd allocations.
inline constexpr int64_t kMaxHidden = 1 << 16;
inline constexpr int64_t kMaxLayers = 1 << 10;
inline constexpr int64_t kMaxVocab = 1 << 24;
inline constexpr int64_t kMaxContext = int64_t{1} << 24;

[[nodiscard]] absl::Status Invalid(std::string_view key, std::string_view what);

// Integer in [lo, hi] under the first present alias of `keys`; `fallback`
// when none is present (nullopt: required).
[[nodiscard]] absl::StatusOr<int64_t> GetInt(
    const Json& obj, std::initializer_list<std::string_view> keys,
    std::optional<int64_t> fallback, int64_t lo, int64_t hi);
// Number in [lo, hi]; `fallback` when absent.
[[nodiscard]] absl::StatusOr<double> GetNumber(const Json& obj,
                                               std::string_view key,
                                               double fallback, double lo,
                                               double hi);
[[nodiscard]] absl::StatusOr<bool> GetBool(const Json& obj,
                                           std::string_view key, bool fallback);
// The string under `key`, "" when absent; INVALID_ARGUMENT when not a string.
[[nodiscard]] absl::StatusOr<std::string> GetString(const Json& obj,
                                                    std::string_view key);
// INVALID_ARGUMENT naming `key` unless it is absent, null or `want` (a
// layout switch the engine implements one way only).
[[nodiscard]] absl::Status RequireBool(const Json& obj, std::string_view key,
                                       bool want);
// The same for a string: absent, null, "" or `want`.
[[nodiscard]] absl::Status RequireString(const Json& obj, std::string_view key,
                                         std::string_view want);
// time_step_limit absent, null or [0, Infinity]: the Mamba-2 kernels apply
// no dt clamp, which is what the published checkpoints ask for.
[[nodiscard]] absl::Status RequireNoDtClamp(const Json& obj);
// The context a model is served with by default: training_context, else
// max_position_embeddings when > 0, else `fallback`.
[[nodiscard]] absl::StatusOr<int64_t> GetTrainingContext(const Json& obj,
                                                         int64_t fallback);

// Parses `text` as a JSON object. Python's json module writes the
// non-standard literals Infinity, -Infinity and NaN (transformers saves
// Mamba-2 and Nemotron-H configs with "time_step_limit": [0.0, Infinity]);
// they are read as the strings "Infinity", "-Infinity" and "NaN", which
// GetNumber does not accept, so only a parser that expects them reads them.
[[nodiscard]] absl::StatusOr<Json> ParseObject(std::string_view text);
// Whether `value` is +infinity as ParseObject reads it (a number or the
// string "Infinity").
bool IsPositiveInfinity(const Json& value);

// The architecture a config names: "architecture", else "model_type", else
// HF "architectures"[0] mapped (LlamaForCausalLM -> llama). "" when none;
// never fails (callers that need a valid file parse it themselves).
std::string ConfigArchitecture(std::string_view text);

}  // namespace twice::engine::config

#endif  // TWICE_ENGINE_CONFIG_JSON_FIELDS_H_
