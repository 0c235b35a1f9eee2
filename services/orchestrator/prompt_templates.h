// What surrounds the question and the document in each ask mode. The strings
// are tokenized separately and concatenated as token ids, so the document's
// stored tokens are reused exactly as ingested.
//
// Templates are per-model configuration: a model directory's config.json may
// carry, all keys optional (missing ones keep the defaults below):
//
//   "twice": {"prompt_templates": {
//       "question_prompt": "\n\nQ: {question}\nA:",
//       "read_twice_preamble": "\n\nQ: {question}\n\n",
//       "document_separator": "\n\n"}}
//
// so a model trained with another QA format is asked in its own format.
#ifndef TWICE_SERVICES_ORCHESTRATOR_PROMPT_TEMPLATES_H_
#define TWICE_SERVICES_ORCHESTRATOR_PROMPT_TEMPLATES_H_

#include <map>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace twice::services {

struct PromptTemplates {
  // Fed after the document state to ask the question; "{question}" is
  // replaced by the question text. Must not be empty (decoding starts from
  // the logits of its last token).
  // Default: "\n\nQuestion: {question}\nAnswer:".
  std::string question_prompt = "\n\nQuestion: {question}\nAnswer:";
  // Fed before the second read of the document in read-twice modes, so the
  // model knows what to look for while it reads again; and before the
  // document inside the prefix of prefix_with_question.
  // Default: "\n\nQuestion: {question}\n\n".
  std::string read_twice_preamble = "\n\nQuestion: {question}\n\n";
  // Between the two copies of the document in read_twice_full.
  // Default: "\n\n".
  std::string document_separator = "\n\n";
};

// Replaces every "{question}" in `pattern`.
std::string FillTemplate(const std::string& pattern,
                         const std::string& question);

// The templates of the model in `model_dir`: `defaults` overridden by the
// keys of config.json's "twice.prompt_templates". INVALID_ARGUMENT (naming
// the key) for an unknown key, a value that is not a string, or an empty
// question_prompt; NOT_FOUND when config.json cannot be read.
[[nodiscard]] absl::StatusOr<PromptTemplates> LoadPromptTemplates(
    const std::string& model_dir, const PromptTemplates& defaults);

// The templates of every served model: each model's own (LoadFor) or the
// defaults. Filled before serving, then read-only.
class ModelPromptTemplates {
 public:
  explicit ModelPromptTemplates(PromptTemplates defaults)
      : defaults_(std::move(defaults)) {}

  // Reads model `name`'s templates from `model_dir` (LoadPromptTemplates).
  [[nodiscard]] absl::Status LoadFor(const std::string& name,
                                     const std::string& model_dir);
  const PromptTemplates& For(const std::string& name) const;

 private:
  PromptTemplates defaults_;
  std::map<std::string, PromptTemplates> by_model_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_PROMPT_TEMPLATES_H_
