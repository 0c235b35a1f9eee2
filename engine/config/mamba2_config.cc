#include "engine/config/mamba2_config.h"

#include <initializer_list>
#include <optional>

#include "absl/strings/str_cat.h"
#include "engine/util/absl_view.h"
#include "kernels/status_macros.h"
#include "nlohmann/json.hpp"

namespace twice::engine {
namespace {

using Json = nlohmann::json;

// Bounds no real model reaches; they keep a hostile config from asking for
// absurd allocations.
constexpr int64_t kMaxHidden = 1 << 16;
constexpr int64_t kMaxLayers = 1 << 10;
constexpr int64_t kMaxVocab = 1 << 24;
constexpr int64_t kMaxState = 1 << 12;
constexpr int64_t kMaxConv = 64;
constexpr int64_t kMaxChunk = 1 << 14;

[[nodiscard]] absl::Status Invalid(std::string_view key,
                                   std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("config.json: \"", AbslView(key), "\" ", AbslView(what)));
}

// The first present, non-null key among `keys`, searched in `root` and then
// in `ssm_cfg` (mixer arguments); nullptr when absent.
const Json* Find(const Json& root, const Json& ssm_cfg,
                 std::initializer_list<std::string_view> keys,
                 std::string_view* found) {
  for (const Json* obj : {&root, &ssm_cfg}) {
    for (std::string_view key : keys) {
      auto it = obj->find(key);
      if (it != obj->end() && !it->is_null()) {
        *found = key;
        return &*it;
      }
    }
  }
  return nullptr;
}

[[nodiscard]] absl::StatusOr<int64_t> GetInt(
    const Json& root, const Json& ssm_cfg,
    std::initializer_list<std::string_view> keys,
    std::optional<int64_t> fallback, int64_t lo, int64_t hi) {
  std::string_view key = *keys.begin();
  const Json* v = Find(root, ssm_cfg, keys, &key);
  if (v == nullptr) {
    if (fallback.has_value()) return *fallback;
    return Invalid(key, "is required");
  }
  if (!v->is_number_integer()) return Invalid(key, "must be an integer");
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) {
    return Invalid(key,
                   absl::StrCat("is ", x, ", must be in [", lo, ", ", hi, "]"));
  }
  return x;
}

[[nodiscard]] absl::StatusOr<bool> GetBool(
    const Json& root, const Json& ssm_cfg,
    std::initializer_list<std::string_view> keys, bool fallback) {
  std::string_view key = *keys.begin();
  const Json* v = Find(root, ssm_cfg, keys, &key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return Invalid(key, "must be true or false");
  return v->get<bool>();
}

// A layout option the engine does not implement must keep its default.
[[nodiscard]] absl::Status Require(const Json& root, const Json& ssm_cfg,
                                   std::initializer_list<std::string_view> keys,
                                   bool want) {
  TWICE_ASSIGN_OR_RETURN(bool got, GetBool(root, ssm_cfg, keys, want));
  if (got != want) {
    return Invalid(*keys.begin(),
                   absl::StrCat("must be ", want ? "true" : "false",
                                " (the only layout implemented)"));
  }
  return absl::OkStatus();
}

std::string StringOr(const Json& obj, std::string_view key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

int64_t Mamba2Config::padded_vocab_size() const {
  const int64_t m = pad_vocab_size_multiple;
  return (vocab_size + m - 1) / m * m;
}

bool IsMamba2ConfigJson(std::string_view json) {
  const Json root = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!root.is_object()) return false;
  if (StringOr(root, "architecture") == "mamba2" ||
      StringOr(root, "model_type") == "mamba2") {
    return true;
  }
  auto ssm = root.find("ssm_cfg");
  return ssm != root.end() && ssm->is_object() &&
         StringOr(*ssm, "layer") == "Mamba2";
}

absl::StatusOr<Mamba2Config> ParseMamba2Config(std::string_view json) {
  const Json root = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!root.is_object()) {
    return absl::InvalidArgumentError("config.json: not a JSON object");
  }
  Json ssm_cfg = Json::object();
  if (auto it = root.find("ssm_cfg"); it != root.end() && !it->is_null()) {
    if (!it->is_object()) return Invalid("ssm_cfg", "must be an object");
    ssm_cfg = *it;
  }
  const Json none = Json::object();
  Mamba2Config c;
  TWICE_ASSIGN_OR_RETURN(c.hidden_size,
                         GetInt(root, none, {"d_model", "hidden_size"},
                                std::nullopt, 1, kMaxHidden));
  TWICE_ASSIGN_OR_RETURN(int64_t layers,
                         GetInt(root, none, {"n_layer", "num_hidden_layers"},
                                std::nullopt, 1, kMaxLayers));
  c.num_layers = static_cast<int>(layers);
  TWICE_ASSIGN_OR_RETURN(c.vocab_size, GetInt(root, none, {"vocab_size"},
                                              std::nullopt, 1, kMaxVocab));
  TWICE_ASSIGN_OR_RETURN(
      c.pad_vocab_size_multiple,
      GetInt(root, none, {"pad_vocab_size_multiple"}, 16, 1, 1 << 12));
  // Only mixer-only blocks exist in the Mamba-2 checkpoints: 0 is required.
  TWICE_RETURN_IF_ERROR(
      GetInt(root, none, {"d_intermediate"}, 0, 0, 0).status());
  TWICE_ASSIGN_OR_RETURN(
      c.d_state,
      GetInt(root, ssm_cfg, {"d_state", "state_size"}, 128, 1, kMaxState));
  TWICE_ASSIGN_OR_RETURN(
      c.d_conv,
      GetInt(root, ssm_cfg, {"d_conv", "conv_kernel"}, 4, 1, kMaxConv));
  TWICE_ASSIGN_OR_RETURN(c.expand, GetInt(root, ssm_cfg, {"expand"}, 2, 1, 16));
  TWICE_ASSIGN_OR_RETURN(
      c.head_dim,
      GetInt(root, ssm_cfg, {"headdim", "head_dim"}, 64, 1, kMaxHidden));
  TWICE_ASSIGN_OR_RETURN(
      c.n_groups,
      GetInt(root, ssm_cfg, {"ngroups", "n_groups"}, 1, 1, kMaxHidden));
  TWICE_ASSIGN_OR_RETURN(
      c.chunk_size, GetInt(root, ssm_cfg, {"chunk_size"}, 256, 1, kMaxChunk));
  if (c.d_inner() % c.head_dim != 0) {
    return Invalid("headdim", absl::StrCat("(", c.head_dim,
                                           ") must divide expand * d_model (",
                                           c.d_inner(), ")"));
  }
  if (c.num_heads() % c.n_groups != 0) {
    return Invalid("ngroups", absl::StrCat("(", c.n_groups,
                                           ") must divide the head count ",
                                           c.num_heads()));
  }
  // A transformers config may state the head count; it must agree.
  TWICE_ASSIGN_OR_RETURN(int64_t heads, GetInt(root, none, {"num_heads"},
                                               c.num_heads(), 1, kMaxHidden));
  if (heads != c.num_heads()) {
    return Invalid("num_heads", absl::StrCat("is ", heads,
                                             ", but expand * "
                                             "d_model / headdim is ",
                                             c.num_heads()));
  }
  std::string_view key;
  if (const Json* d_ssm = Find(root, ssm_cfg, {"d_ssm"}, &key);
      d_ssm != nullptr &&
      !(d_ssm->is_number_integer() && d_ssm->get<int64_t>() == c.d_inner())) {
    return Invalid("d_ssm", "must be null or expand * d_model");
  }
  if (const Json* attn = Find(root, none, {"attn_layer_idx"}, &key);
      attn != nullptr && !(attn->is_array() && attn->empty())) {
    return Invalid("attn_layer_idx", "must be empty (no attention layers)");
  }
  TWICE_RETURN_IF_ERROR(Require(root, none, {"rms_norm"}, true));
  TWICE_RETURN_IF_ERROR(Require(root, ssm_cfg, {"norm_before_gate"}, false));
  TWICE_RETURN_IF_ERROR(Require(root, ssm_cfg, {"D_has_hdim"}, false));
  TWICE_RETURN_IF_ERROR(Require(root, ssm_cfg, {"bias", "use_bias"}, false));
  TWICE_RETURN_IF_ERROR(
      Require(root, ssm_cfg, {"conv_bias", "use_conv_bias"}, true));
  if (const Json* eps =
          Find(root, none, {"norm_epsilon", "layer_norm_epsilon"}, &key);
      eps != nullptr) {
    if (!eps->is_number() || !(eps->get<double>() > 0.0) ||
        eps->get<double>() > 1.0) {
      return Invalid(key, "must be a number in (0, 1]");
    }
    c.norm_eps = static_cast<float>(eps->get<double>());
  }
  TWICE_ASSIGN_OR_RETURN(
      c.tie_word_embeddings,
      GetBool(root, none, {"tie_embeddings", "tie_word_embeddings"}, true));
  TWICE_ASSIGN_OR_RETURN(
      c.eos_token_id, GetInt(root, none, {"eos_token_id"}, -1, -1, kMaxVocab));
  TWICE_ASSIGN_OR_RETURN(
      int64_t max_pos,
      GetInt(root, none, {"max_position_embeddings"}, 0, 0, int64_t{1} << 40));
  TWICE_ASSIGN_OR_RETURN(
      c.training_context,
      GetInt(root, none, {"training_context"}, max_pos > 0 ? max_pos : 2048, 1,
             int64_t{1} << 40));
  c.canonical_json = root.dump();
  return c;
}

}  // namespace twice::engine
