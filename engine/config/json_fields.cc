#include "engine/config/json_fields.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/util/absl_view.h"

namespace twice::engine::config {

absl::Status Invalid(std::string_view key, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("config.json: \"", AbslView(key), "\" ", AbslView(what)));
}

absl::StatusOr<int64_t> GetInt(const Json& obj,
                               std::initializer_list<std::string_view> keys,
                               std::optional<int64_t> fallback, int64_t lo,
                               int64_t hi) {
  for (std::string_view key : keys) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) continue;
    if (!it->is_number_integer()) return Invalid(key, "must be an integer");
    const int64_t x = it->get<int64_t>();
    if (x < lo || x > hi) {
      return Invalid(
          key, absl::StrCat("is ", x, ", must be in [", lo, ", ", hi, "]"));
    }
    return x;
  }
  if (fallback.has_value()) return *fallback;
  return Invalid(*keys.begin(), "is required");
}

absl::StatusOr<double> GetNumber(const Json& obj, std::string_view key,
                                 double fallback, double lo, double hi) {
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

absl::StatusOr<bool> GetBool(const Json& obj, std::string_view key,
                             bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return Invalid(key, "must be true or false");
  return it->get<bool>();
}

absl::Status RequireBool(const Json& obj, std::string_view key, bool want) {
  auto got = GetBool(obj, key, want);
  if (!got.ok()) return got.status();
  if (*got != want) {
    return Invalid(key, absl::StrCat("must be ", want ? "true" : "false",
                                     " (the layout this engine implements)"));
  }
  return absl::OkStatus();
}

absl::Status RequireString(const Json& obj, std::string_view key,
                           std::string_view want) {
  auto got = GetString(obj, key);
  if (!got.ok()) return got.status();
  if (!got->empty() && *got != want) {
    return Invalid(key, absl::StrCat("is \"", *got, "\"; only \"",
                                     AbslView(want), "\" is supported"));
  }
  return absl::OkStatus();
}

absl::Status RequireNoDtClamp(const Json& obj) {
  auto it = obj.find("time_step_limit");
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (it->is_array() && it->size() == 2 && (*it)[0].is_number() &&
      (*it)[0].get<double>() == 0.0 && IsPositiveInfinity((*it)[1])) {
    return absl::OkStatus();
  }
  return Invalid("time_step_limit",
                 "must be [0.0, Infinity] (dt is not clamped here)");
}

absl::StatusOr<int64_t> GetTrainingContext(const Json& obj, int64_t fallback) {
  auto max_pos = GetInt(obj, {"max_position_embeddings"}, 0, 0, kMaxContext);
  if (!max_pos.ok()) return max_pos.status();
  return GetInt(obj, {"training_context"}, *max_pos > 0 ? *max_pos : fallback,
                1, kMaxContext);
}

absl::StatusOr<std::string> GetString(const Json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Invalid(key, "must be a string");
  return it->get<std::string>();
}

namespace {

// `text` with Python's bare Infinity / -Infinity / NaN literals (outside
// strings) quoted, so that a strict JSON parser reads them as strings.
std::string QuotePythonLiterals(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < text.size()) {
        out.push_back(text[++i]);
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    bool quoted = false;
    for (std::string_view literal : {"-Infinity", "Infinity", "NaN"}) {
      if (text.substr(i, literal.size()) == literal) {
        out.push_back('"');
        out.append(literal);
        out.push_back('"');
        i += literal.size() - 1;
        quoted = true;
        break;
      }
    }
    if (!quoted) out.push_back(c);
  }
  return out;
}

Json ParseLenient(std::string_view text) {
  if (text.find("Infinity") == std::string_view::npos &&
      text.find("NaN") == std::string_view::npos) {
    return Json::parse(text, nullptr, /*allow_exceptions=*/false);
  }
  return Json::parse(QuotePythonLiterals(text), nullptr,
                     /*allow_exceptions=*/false);
}

}  // namespace

bool IsPositiveInfinity(const Json& value) {
  if (value.is_string()) return value.get<std::string>() == "Infinity";
  return value.is_number() && value.get<double>() > 0 &&
         std::isinf(value.get<double>());
}

absl::StatusOr<Json> ParseObject(std::string_view text) {
  Json root = ParseLenient(text);
  if (root.is_discarded() || !root.is_object()) {
    return absl::InvalidArgumentError("config.json is not a JSON object");
  }
  return root;
}

std::string ConfigArchitecture(std::string_view text) {
  const Json root = ParseLenient(text);
  if (root.is_discarded() || !root.is_object()) return "";
  for (const char* key : {"architecture", "model_type"}) {
    auto it = root.find(key);
    if (it != root.end() && it->is_string()) return it->get<std::string>();
  }
  auto it = root.find("architectures");
  if (it != root.end() && it->is_array() && !it->empty() &&
      (*it)[0].is_string()) {
    const std::string a = (*it)[0].get<std::string>();
    if (a == "LlamaForCausalLM") return "llama";
    if (a == "NemotronHForCausalLM") return "nemotron_h";
    if (a == "GraniteMoeHybridForCausalLM") return "granitemoehybrid";
    return a;
  }
  return "";
}

}  // namespace twice::engine::config
