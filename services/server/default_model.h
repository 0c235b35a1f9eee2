// The built-in default model: a tiny random-weight Based model with the
// GPT-2 tokenizer, created under DATA_DIR/models/default on first start so
// a server runs with no model download. (A trained default replaces it in
// a later release; the directory layout stays the same.)
#ifndef TWICE_SERVICES_SERVER_DEFAULT_MODEL_H_
#define TWICE_SERVICES_SERVER_DEFAULT_MODEL_H_

#include <string>

#include "absl/status/statusor.h"

namespace twice::services {

// Path of the GPT-2 tokenizer.json shipped with Twice.
std::string BuiltinTokenizerPath();

// Returns the default model's directory, writing it first when missing.
[[nodiscard]] absl::StatusOr<std::string> EnsureDefaultModel(
    const std::string& data_dir);

}  // namespace twice::services

#endif  // TWICE_SERVICES_SERVER_DEFAULT_MODEL_H_
