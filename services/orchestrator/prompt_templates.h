// What surrounds the question and the document in each ask mode. The strings
// are tokenized separately and concatenated as token ids, so the document's
// stored tokens are reused exactly as ingested.
#ifndef TWICE_SERVICES_ORCHESTRATOR_PROMPT_TEMPLATES_H_
#define TWICE_SERVICES_ORCHESTRATOR_PROMPT_TEMPLATES_H_

#include <string>

namespace twice::services {

struct PromptTemplates {
  // Fed after the document state to ask the question; "{question}" is
  // replaced by the question text.
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
std::string FillTemplate(const std::string& pattern, const std::string& question);

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_PROMPT_TEMPLATES_H_
