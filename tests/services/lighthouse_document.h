// The document and question the end-to-end pipeline tests read and ask,
// and token counts by a model's own tokenizer (what usage must report).
#ifndef TWICE_TESTS_SERVICES_LIGHTHOUSE_DOCUMENT_H_
#define TWICE_TESTS_SERVICES_LIGHTHOUSE_DOCUMENT_H_

#include <cstdint>
#include <string>

#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/grpc_status_matchers.h"

namespace twice::testing {

// About 90 GPT-2 tokens: longer than a JRT encoder (64) or an SSD chunk of
// the tiny presets, several RAT chunks (16) and a partial one.
inline constexpr char kLighthouseDocument[] =
    "The harbour town of Kelloway sits at the mouth of a cold green river. "
    "Its lighthouse stands on the northern breakwater, a white tower with a "
    "red lamp room. The keeper of the lighthouse is Marta Vell, who climbs "
    "the one hundred and twelve steps every evening to light the lamp. The "
    "town has three bakeries, a fish market and a library that was once a "
    "customs house.";
inline constexpr char kLighthouseQuestion[] = "Who keeps the lighthouse?";

// Tokens of `text` by the tokenizer of the model in `model_dir`.
inline int64_t CountTokens(const std::string& model_dir,
                           const std::string& text) {
  auto tokenizer = engine::Tokenizer::FromFile(model_dir + "/tokenizer.json");
  EXPECT_OK(tokenizer);
  if (!tokenizer.ok()) return -1;
  auto ids = (*tokenizer)->Encode(text);
  EXPECT_OK(ids);
  return ids.ok() ? static_cast<int64_t>(ids->size()) : -1;
}

// The default templates' question prompt and read-twice preamble
// (services/orchestrator/prompt_templates.h), as the orchestrator fills
// them.
inline std::string QuestionPrompt(const std::string& question) {
  return "\n\nQuestion: " + question + "\nAnswer:";
}
inline std::string ReadTwicePreamble(const std::string& question) {
  return "\n\nQuestion: " + question + "\n\n";
}

}  // namespace twice::testing

#endif  // TWICE_TESTS_SERVICES_LIGHTHOUSE_DOCUMENT_H_
