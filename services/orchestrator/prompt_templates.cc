#include "services/orchestrator/prompt_templates.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace twice::services {

std::string FillTemplate(const std::string& pattern,
                         const std::string& question) {
  return absl::StrReplaceAll(pattern, {{"{question}", question}});
}

absl::StatusOr<PromptTemplates> LoadPromptTemplates(
    const std::string& model_dir, const PromptTemplates& defaults) {
  const std::string path = model_dir + "/config.json";
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json config =
      nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a JSON object"));
  }
  PromptTemplates templates = defaults;
  auto twice = config.find("twice");
  if (twice == config.end()) return templates;
  if (!twice->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": \"twice\" must be an object"));
  }
  auto section = twice->find("prompt_templates");
  if (section == twice->end()) return templates;
  if (!section->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": \"twice.prompt_templates\" must be an object"));
  }
  for (const auto& [key, value] : section->items()) {
    std::string* field = nullptr;
    if (key == "question_prompt") {
      field = &templates.question_prompt;
    } else if (key == "read_twice_preamble") {
      field = &templates.read_twice_preamble;
    } else if (key == "document_separator") {
      field = &templates.document_separator;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": unknown key twice.prompt_templates.", key,
                       " (known: question_prompt, read_twice_preamble, "
                       "document_separator)"));
    }
    if (!value.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": twice.prompt_templates.", key, " must be a string"));
    }
    *field = value.get<std::string>();
  }
  if (templates.question_prompt.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": twice.prompt_templates.question_prompt must not be empty"));
  }
  return templates;
}

absl::Status ModelPromptTemplates::LoadFor(const std::string& name,
                                           const std::string& model_dir) {
  absl::StatusOr<PromptTemplates> templates =
      LoadPromptTemplates(model_dir, defaults_);
  if (!templates.ok()) return templates.status();
  by_model_[name] = *std::move(templates);
  return absl::OkStatus();
}

const PromptTemplates& ModelPromptTemplates::For(
    const std::string& name) const {
  auto it = by_model_.find(name);
  return it != by_model_.end() ? it->second : defaults_;
}

}  // namespace twice::services
