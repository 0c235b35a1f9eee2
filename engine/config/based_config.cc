#include "engine/config/based_config.h"

#include <algorithm>
#include <exception>
#include <initializer_list>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/util/absl_view.h"
#include "kernels/status_macros.h"
#include "nlohmann/json.hpp"

namespace twice::engine {
namespace {

using Json = nlohmann::json;

// Bounds that no real model reaches; they keep a hostile config from asking
// for absurd allocations.
constexpr int64_t kMaxHidden = 1 << 16;
constexpr int64_t kMaxLayers = 1 << 10;
constexpr int64_t kMaxVocab = 1 << 24;
constexpr int64_t kMaxWindow = 1 << 20;
constexpr int64_t kMaxFeatureDim = 64;
constexpr int64_t kMaxWindowFloats = int64_t{1} << 28;
constexpr int64_t kMaxPrefix = int64_t{1} << 24;

[[nodiscard]] absl::Status Invalid(std::string_view key,
                                   std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("config.json: \"", AbslView(key), "\" ", AbslView(what)));
}

// The first present key among `keys` (aliases), or nullptr.
const Json* Find(const Json& obj, std::initializer_list<std::string_view> keys,
                 std::string_view* found_key) {
  for (std::string_view key : keys) {
    auto it = obj.find(key);
    if (it != obj.end() && !it->is_null()) {
      *found_key = key;
      return &*it;
    }
  }
  return nullptr;
}

// Integer in [lo, hi] under the first present alias; `fallback` when absent
// (nullopt: required).
[[nodiscard]] absl::StatusOr<int64_t> GetInt(
    const Json& obj, std::initializer_list<std::string_view> keys,
    std::optional<int64_t> fallback, int64_t lo, int64_t hi) {
  std::string_view key = *keys.begin();
  const Json* v = Find(obj, keys, &key);
  if (v == nullptr) {
    if (fallback.has_value()) return *fallback;
    std::string names;
    for (std::string_view k : keys) {
      if (!names.empty()) names += "\" or \"";
      names += k;
    }
    return Invalid(names, "is required");
  }
  if (!v->is_number_integer()) return Invalid(key, "must be an integer");
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) {
    return Invalid(key,
                   absl::StrCat("is ", x, ", must be in [", lo, ", ", hi, "]"));
  }
  return x;
}

[[nodiscard]] absl::StatusOr<double> GetNumber(const Json& obj,
                                               std::string_view key,
                                               double fallback, double lo,
                                               double hi) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_number()) return Invalid(key, "must be a number");
  const double x = it->get<double>();
  if (!(x >= lo && x <= hi)) {
    return Invalid(key,
                   absl::StrCat("is ", x, ", must be in [", lo, ", ", hi, "]"));
  }
  return x;
}

[[nodiscard]] absl::StatusOr<std::vector<int>> GetLayerList(
    const Json& obj, std::string_view key, int num_layers) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::vector<int>{};
  if (!it->is_array()) return Invalid(key, "must be an array of layer indices");
  std::vector<int> out;
  std::set<int64_t> seen;
  for (const Json& v : *it) {
    if (!v.is_number_integer()) {
      return Invalid(key, "must hold integer layer indices");
    }
    const int64_t i = v.get<int64_t>();
    if (i < 0 || i >= num_layers) {
      return Invalid(key, absl::StrCat("holds layer ", i, ", outside [0, ",
                                       num_layers, ")"));
    }
    if (!seen.insert(i).second) {
      return Invalid(key, absl::StrCat("lists layer ", i, " twice"));
    }
    out.push_back(static_cast<int>(i));
  }
  return out;
}

// An optional nested object ("alt_mixer"); an empty object when absent.
[[nodiscard]] absl::StatusOr<Json> GetObject(const Json& obj,
                                             std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Json::object();
  if (!it->is_object()) return Invalid(key, "must be an object");
  return *it;
}

// Whether alt_mixer names the JRT mixer class by its hydra `_target_`
// ("...prefix_linear_attention.PrefixLinearAttention").
bool NamesPrefixLinearAttention(const Json& root) {
  auto alt = root.find("alt_mixer");
  if (alt == root.end() || !alt->is_object()) return false;
  auto target = alt->find("_target_");
  return target != alt->end() && target->is_string() &&
         target->get<std::string>().ends_with("PrefixLinearAttention");
}

[[nodiscard]] absl::StatusOr<std::string> GetArchitecture(const Json& root) {
  const bool pla = NamesPrefixLinearAttention(root);
  std::string_view key = "architecture";
  std::string arch;
  if (auto it = root.find("architecture"); it != root.end()) {
    if (!it->is_string()) return Invalid("architecture", "must be a string");
    arch = it->get<std::string>();
  } else if (auto type = root.find("model_type"); type != root.end()) {
    if (!type->is_string()) return Invalid("model_type", "must be a string");
    key = "model_type";
    arch = type->get<std::string>();
    // Upstream Based and JRT configs are GPT2Config dumps; the mixer keys
    // tell them apart from a plain GPT-2 and from each other.
    if (arch == "gpt2" && root.contains("alt_mixer")) {
      arch = pla ? "jrt" : "based";
    }
  } else {
    arch = pla ? "jrt" : "based";
  }
  if (arch == "based" && pla) {
    return Invalid(key,
                   "is \"based\" but alt_mixer._target_ names "
                   "PrefixLinearAttention, a JRT-RNN layer");
  }
  return arch;
}

// The JRT keys: enc_length (top level, else inside alt_mixer; upstream's
// PrefixLinearAttention takes it as a constructor argument) and the pad
// token of the left-padding protocol.
[[nodiscard]] absl::Status ParsePrefixKeys(const Json& root, const Json& alt,
                                           BasedConfig& c) {
  if (!c.is_jrt()) return absl::OkStatus();
  TWICE_ASSIGN_OR_RETURN(int64_t nested,
                         GetInt(alt, {"enc_length"}, 1024, 1, kMaxPrefix));
  TWICE_ASSIGN_OR_RETURN(c.prefix_length,
                         GetInt(root, {"enc_length"}, nested, 1, kMaxPrefix));
  TWICE_ASSIGN_OR_RETURN(
      c.prefix_pad_token_id,
      GetInt(root, {"prefix_pad_token_id"}, 220, 0, c.vocab_size - 1));
  return absl::OkStatus();
}

[[nodiscard]] absl::StatusOr<BasedConfig> Parse(const Json& root) {
  if (!root.is_object()) {
    return absl::InvalidArgumentError("config.json: not a JSON object");
  }
  BasedConfig c;
  TWICE_ASSIGN_OR_RETURN(c.architecture, GetArchitecture(root));
  if (c.architecture != "based" && c.architecture != "jrt") {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json: architecture \"", c.architecture,
        "\" is not supported here (expected \"based\" or \"jrt\")"));
  }
  TWICE_ASSIGN_OR_RETURN(c.hidden_size, GetInt(root, {"n_embd", "hidden_size"},
                                               std::nullopt, 1, kMaxHidden));
  TWICE_ASSIGN_OR_RETURN(int64_t layers,
                         GetInt(root, {"n_layer", "num_hidden_layers"},
                                std::nullopt, 1, kMaxLayers));
  c.num_layers = static_cast<int>(layers);
  TWICE_ASSIGN_OR_RETURN(int64_t heads,
                         GetInt(root, {"n_head", "num_attention_heads"},
                                std::nullopt, 1, c.hidden_size));
  c.num_heads = static_cast<int>(heads);
  TWICE_ASSIGN_OR_RETURN(c.n_inner, GetInt(root, {"n_inner"}, 4 * c.hidden_size,
                                           1, 16 * kMaxHidden));
  TWICE_ASSIGN_OR_RETURN(
      c.vocab_size, GetInt(root, {"vocab_size"}, std::nullopt, 1, kMaxVocab));
  TWICE_ASSIGN_OR_RETURN(c.pad_vocab_size_multiple,
                         GetInt(root, {"pad_vocab_size_multiple"}, 8, 1, 1024));
  TWICE_ASSIGN_OR_RETURN(double eps,
                         GetNumber(root, "layer_norm_epsilon", 1e-5, 0.0, 1.0));
  c.norm_eps = static_cast<float>(eps);
  TWICE_ASSIGN_OR_RETURN(
      double base, GetNumber(root, "rotary_emb_base", 10000.0, 1.0, 1e12));
  c.rotary_base = static_cast<float>(base);
  TWICE_ASSIGN_OR_RETURN(c.eos_token_id,
                         GetInt(root, {"eos_token_id"}, -1, -1, kMaxVocab - 1));
  TWICE_ASSIGN_OR_RETURN(
      int64_t positions,
      GetInt(root, {"max_position_embeddings", "n_positions"}, 0, 0,
             int64_t{1} << 40));
  TWICE_ASSIGN_OR_RETURN(
      c.training_context,
      GetInt(root, {"training_context"}, positions > 0 ? positions : 2048, 1,
             int64_t{1} << 40));
  if (auto tie = root.find("tie_word_embeddings"); tie != root.end()) {
    if (!tie->is_boolean()) {
      return Invalid("tie_word_embeddings", "must be true or false");
    }
    c.tie_word_embeddings = tie->get<bool>();
  }

  TWICE_ASSIGN_OR_RETURN(Json mixer, GetObject(root, "mixer"));
  TWICE_ASSIGN_OR_RETURN(c.conv_expand_proj,
                         GetInt(mixer, {"expand_proj"}, 4, 1, 64));
  if ((c.conv_expand_proj * c.hidden_size) % 2 != 0) {
    return Invalid("mixer.expand_proj", "times n_embd must be even");
  }

  TWICE_ASSIGN_OR_RETURN(Json alt, GetObject(root, "alt_mixer"));
  TWICE_ASSIGN_OR_RETURN(Json feature_map, GetObject(alt, "feature_map"));
  TWICE_ASSIGN_OR_RETURN(int64_t map_dim, GetInt(feature_map, {"input_dim"}, 16,
                                                 1, kMaxFeatureDim));
  TWICE_ASSIGN_OR_RETURN(
      c.feature_dim, GetInt(alt, {"feature_dim"}, map_dim, 1, kMaxFeatureDim));
  TWICE_ASSIGN_OR_RETURN(
      int64_t la_heads,
      GetInt(alt, {"num_heads"}, c.num_heads, 1, c.hidden_size));
  c.linear_attention_heads = static_cast<int>(la_heads);
  TWICE_ASSIGN_OR_RETURN(double la_eps, GetNumber(alt, "eps", 1e-12, 0.0, 1.0));
  c.linear_attention_eps = static_cast<float>(la_eps);
  TWICE_RETURN_IF_ERROR(ParsePrefixKeys(root, alt, c));

  TWICE_ASSIGN_OR_RETURN(Json alt2, GetObject(root, "alt_mixer_2"));
  TWICE_ASSIGN_OR_RETURN(c.linear_attention_layers,
                         GetLayerList(root, "alt_mixer_layers", c.num_layers));
  TWICE_ASSIGN_OR_RETURN(
      c.sliding_window_layers,
      GetLayerList(root, "alt_mixer_2_layers", c.num_layers));

  if (!c.linear_attention_layers.empty() &&
      c.hidden_size % c.linear_attention_heads != 0) {
    return Invalid("alt_mixer.num_heads",
                   absl::StrCat("(", c.linear_attention_heads,
                                ") must divide n_embd (", c.hidden_size, ")"));
  }
  if (!c.sliding_window_layers.empty()) {
    TWICE_ASSIGN_OR_RETURN(c.window_size, GetInt(alt2, {"window_size"},
                                                 std::nullopt, 2, kMaxWindow));
    // The window ring holds 2 · (window_size / 2) · d floats per layer.
    if ((c.window_size / 2) * c.hidden_size > kMaxWindowFloats) {
      return Invalid("alt_mixer_2.window_size",
                     absl::StrCat("(", c.window_size, ") times n_embd (",
                                  c.hidden_size, ") is too large"));
    }
    if (c.hidden_size % c.num_heads != 0 ||
        (c.hidden_size / c.num_heads) % 2 != 0) {
      return Invalid("n_head",
                     absl::StrCat("(", c.num_heads, ") must divide n_embd (",
                                  c.hidden_size,
                                  ") into an even head dimension for rotary"));
    }
  }
  c.canonical_json = root.dump();
  return c;
}

}  // namespace

int64_t BasedConfig::padded_vocab_size() const {
  const int64_t m = pad_vocab_size_multiple;
  return (vocab_size + m - 1) / m * m;
}

int64_t BasedConfig::mlp_hidden() const { return (n_inner + 255) / 256 * 256; }

BasedMixerKind BasedConfig::mixer(int layer) const {
  auto has = [layer](const std::vector<int>& v) {
    return std::find(v.begin(), v.end(), layer) != v.end();
  };
  if (has(sliding_window_layers)) return BasedMixerKind::kSlidingWindow;
  if (has(linear_attention_layers)) {
    return is_jrt() ? BasedMixerKind::kPrefixLinearAttention
                    : BasedMixerKind::kLinearAttention;
  }
  return BasedMixerKind::kBaseConv;
}

absl::StatusOr<BasedConfig> ParseBasedConfig(std::string_view json) {
  const Json root = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError("config.json: not valid JSON");
  }
  try {
    return Parse(root);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: malformed: ", e.what()));
  }
}

}  // namespace twice::engine
