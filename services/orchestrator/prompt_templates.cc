#include "services/orchestrator/prompt_templates.h"

#include "absl/strings/str_replace.h"

namespace twice::services {

std::string FillTemplate(const std::string& pattern,
                         const std::string& question) {
  return absl::StrReplaceAll(pattern, {{"{question}", question}});
}

}  // namespace twice::services
