// Tokenizer::FromJson: reads a HuggingFace tokenizer.json into the options
// of one of the implementations. Only what changes encoding is checked; a
// field we cannot honour (a normalizer, another pre-tokenizer) is refused
// rather than ignored, since ignoring it would silently produce other ids.
#include "engine/tokenizer/tokenizer.h"

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/word_level_tokenizer.h"

namespace twice::engine {
namespace {

using Json = nlohmann::json;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(what);
}

// The "type" of an optional component object; "" when absent or null.
absl::StatusOr<std::string> ComponentType(const Json& root,
                                          const std::string& name) {
  const auto it = root.find(name);
  if (it == root.end() || it->is_null()) return std::string();
  if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string()) {
    return Invalid(absl::StrCat(name,
                                " must be null or an object with a "
                                "string \"type\""));
  }
  return (*it)["type"].get<std::string>();
}

absl::StatusOr<bool> OptionalBool(const Json& object, const std::string& field,
                                  const std::string& where, bool fallback) {
  const auto it = object.find(field);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    return Invalid(absl::StrCat(where, ".", field, " must be a boolean"));
  }
  return it->get<bool>();
}

absl::StatusOr<int32_t> ParseId(const Json& value, const std::string& where) {
  if (!value.is_number_integer()) {
    return Invalid(absl::StrCat(where, " must be an integer id"));
  }
  if (value.is_number_unsigned()) {
    const auto id = value.get<uint64_t>();
    if (id > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
      return Invalid(absl::StrCat(where, " = ", id, " is too large"));
    }
    return static_cast<int32_t>(id);
  }
  return Invalid(
      absl::StrCat(where, " = ", value.get<int64_t>(), " is negative"));
}

absl::StatusOr<std::vector<std::pair<std::string, int32_t>>> ParseVocab(
    const Json& model) {
  const auto it = model.find("vocab");
  if (it == model.end() || !it->is_object()) {
    return Invalid("model.vocab must be an object mapping token to id");
  }
  std::vector<std::pair<std::string, int32_t>> vocab;
  vocab.reserve(it->size());
  for (const auto& [token, value] : it->items()) {
    absl::StatusOr<int32_t> id =
        ParseId(value, absl::StrCat("model.vocab[\"", token, "\"]"));
    if (!id.ok()) return id.status();
    vocab.emplace_back(token, *id);
  }
  return vocab;
}

absl::StatusOr<std::vector<AddedToken>> ParseAddedTokens(const Json& root) {
  std::vector<AddedToken> added;
  const auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return added;
  if (!it->is_array()) return Invalid("added_tokens must be an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& entry = (*it)[i];
    const std::string where = absl::StrCat("added_tokens[", i, "]");
    if (!entry.is_object() || !entry.contains("content") ||
        !entry["content"].is_string() || !entry.contains("id")) {
      return Invalid(absl::StrCat(
          where, " must be an object with string \"content\" and \"id\""));
    }
    AddedToken token;
    token.content = entry["content"].get<std::string>();
    if (token.content.empty()) {
      return Invalid(absl::StrCat(where, ".content is empty"));
    }
    absl::StatusOr<int32_t> id = ParseId(entry["id"], where + ".id");
    if (!id.ok()) return id.status();
    token.id = *id;
    added.push_back(std::move(token));
  }
  return added;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseMerges(
    const Json& model) {
  const auto it = model.find("merges");
  if (it == model.end() || !it->is_array()) {
    return Invalid("model.merges must be an array");
  }
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& entry = (*it)[i];
    std::string left;
    std::string right;
    if (entry.is_string()) {
      // "a b": tokens of a byte-level vocabulary never hold a space.
      const std::string text = entry.get<std::string>();
      const size_t space = text.find(' ');
      if (space != std::string::npos &&
          text.find(' ', space + 1) == std::string::npos) {
        left = text.substr(0, space);
        right = text.substr(space + 1);
      }
    } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() &&
               entry[1].is_string()) {
      left = entry[0].get<std::string>();
      right = entry[1].get<std::string>();
    }
    if (left.empty() || right.empty()) {
      return Invalid(absl::StrCat("model.merges[", i, "] = ", entry.dump(),
                                  " is not \"a b\" or [\"a\", \"b\"]"));
    }
    merges.emplace_back(std::move(left), std::move(right));
  }
  return merges;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> ParseBpe(const Json& root,
                                                    const Json& model) {
  BpeOptions options;
  // Options that would change the ids and that byte-level GPT-2 files never
  // set.
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0)) {
    return Invalid("model.dropout is not supported");
  }
  for (const char* field :
       {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(field) && !model[field].is_null() &&
        !(model[field].is_string() &&
          model[field].get<std::string>().empty())) {
      return Invalid(absl::StrCat("model.", field, " is not supported"));
    }
  }

  absl::StatusOr<std::string> pre = ComponentType(root, "pre_tokenizer");
  if (!pre.ok()) return pre.status();
  if (*pre != "ByteLevel") {
    return Invalid(absl::StrCat("BPE needs a ByteLevel pre_tokenizer, not \"",
                                *pre, "\""));
  }
  const Json& pre_tokenizer = root["pre_tokenizer"];
  // Defaults are HuggingFace's for ByteLevel.
  absl::StatusOr<bool> prefix = OptionalBool(
      pre_tokenizer, "add_prefix_space", "pre_tokenizer", /*fallback=*/true);
  if (!prefix.ok()) return prefix.status();
  absl::StatusOr<bool> regex = OptionalBool(pre_tokenizer, "use_regex",
                                            "pre_tokenizer", /*fallback=*/true);
  if (!regex.ok()) return regex.status();
  options.add_prefix_space = *prefix;
  options.use_regex = *regex;

  absl::StatusOr<std::string> decoder = ComponentType(root, "decoder");
  if (!decoder.ok()) return decoder.status();
  if (!decoder->empty() && *decoder != "ByteLevel") {
    return Invalid(absl::StrCat("decoder \"", *decoder,
                                "\" is not supported for BPE (ByteLevel)"));
  }

  absl::StatusOr<std::vector<std::pair<std::string, int32_t>>> vocab =
      ParseVocab(model);
  if (!vocab.ok()) return vocab.status();
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> merges =
      ParseMerges(model);
  if (!merges.ok()) return merges.status();
  absl::StatusOr<std::vector<AddedToken>> added = ParseAddedTokens(root);
  if (!added.ok()) return added.status();
  options.vocab = *std::move(vocab);
  options.merges = *std::move(merges);
  options.added_tokens = *std::move(added);

  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer =
      BpeTokenizer::Create(std::move(options));
  if (!tokenizer.ok()) return tokenizer.status();
  return std::unique_ptr<Tokenizer>(*std::move(tokenizer));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> ParseWordLevel(const Json& root,
                                                          const Json& model) {
  WordLevelOptions options;
  absl::StatusOr<std::string> pre = ComponentType(root, "pre_tokenizer");
  if (!pre.ok()) return pre.status();
  // Without a pre-tokenizer the whole text would be one word, which no
  // vocabulary holds; splitting at whitespace is what such files mean.
  if (pre->empty() || *pre == "WhitespaceSplit") {
    options.split = WordSplit::kWhitespace;
  } else if (*pre == "Whitespace") {
    options.split = WordSplit::kWordsAndPunctuation;
  } else {
    return Invalid(absl::StrCat(
        "pre_tokenizer \"", *pre,
        "\" is not supported for WordLevel (WhitespaceSplit, Whitespace)"));
  }

  const auto unk = model.find("unk_token");
  if (unk == model.end() || !unk->is_string()) {
    return Invalid("model.unk_token must be a string");
  }
  options.unk_token = unk->get<std::string>();

  absl::StatusOr<std::vector<std::pair<std::string, int32_t>>> vocab =
      ParseVocab(model);
  if (!vocab.ok()) return vocab.status();
  absl::StatusOr<std::vector<AddedToken>> added = ParseAddedTokens(root);
  if (!added.ok()) return added.status();
  options.vocab = *std::move(vocab);
  options.added_tokens = *std::move(added);

  absl::StatusOr<std::unique_ptr<WordLevelTokenizer>> tokenizer =
      WordLevelTokenizer::Create(std::move(options));
  if (!tokenizer.ok()) return tokenizer.status();
  return std::unique_ptr<Tokenizer>(*std::move(tokenizer));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> ParseRoot(const Json& root) {
  if (!root.is_object()) return Invalid("top level must be an object");
  absl::StatusOr<std::string> normalizer = ComponentType(root, "normalizer");
  if (!normalizer.ok()) return normalizer.status();
  if (!normalizer->empty()) {
    return Invalid(
        absl::StrCat("normalizer \"", *normalizer, "\" is not supported"));
  }
  const auto model = root.find("model");
  if (model == root.end() || !model->is_object()) {
    return Invalid("model must be an object");
  }
  std::string type;
  if (model->contains("type")) {
    if (!(*model)["type"].is_string()) {
      return Invalid("model.type must be a string");
    }
    type = (*model)["type"].get<std::string>();
  } else if (model->contains("merges")) {
    type = "BPE";  // older files leave the type out
  }
  if (type == "BPE") return ParseBpe(root, *model);
  if (type == "WordLevel") return ParseWordLevel(root, *model);
  return Invalid(absl::StrCat("model.type \"", type,
                              "\" is not supported (BPE, WordLevel)"));
}

// Parses and names the source (a path, or "tokenizer.json") in errors.
absl::StatusOr<std::unique_ptr<Tokenizer>> Parse(std::string_view json,
                                                 const std::string& source) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer;
  // nlohmann reports errors by throwing; nothing may leave this function
  // that way.
  try {
    tokenizer = ParseRoot(Json::parse(json));
  } catch (const Json::exception& e) {
    tokenizer = Invalid(e.what());
  }
  if (!tokenizer.ok()) {
    return absl::Status(
        tokenizer.status().code(),
        absl::StrCat(source, ": ", tokenizer.status().message()));
  }
  return tokenizer;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(
    std::string_view json) {
  return Parse(json, "tokenizer.json");
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(
    const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(
        absl::StrCat("cannot open tokenizer file ", path));
  }
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) {
    return absl::UnavailableError(absl::StrCat("error reading ", path));
  }
  return Parse(contents.str(), path);
}

}  // namespace twice::engine
