// ModelRegistry: the models a server process serves, by name. Filled once at
// start-up, then read-only, so lookups need no lock.
#ifndef TWICE_SERVICES_COMMON_MODEL_REGISTRY_H_
#define TWICE_SERVICES_COMMON_MODEL_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/models/model.h"
#include "twice/v1/common.pb.h"

namespace twice::services {

class ModelRegistry {
 public:
  // Loads the model in `dir` under `name`. The first model added is the
  // default.
  [[nodiscard]] absl::Status Load(const std::string& name,
                                  const std::string& dir,
                                  const engine::LoadOptions& options = {});
  // `tokenizer_sha256`: hex SHA-256 of the tokenizer.json the model was
  // loaded with (ModelInfo.tokenizer_sha256), when known.
  void Add(const std::string& name, std::unique_ptr<engine::Model> model,
           std::string tokenizer_sha256 = "");

  // Empty name = the default model. NOT_FOUND names the known models.
  [[nodiscard]] absl::StatusOr<const engine::Model*> Find(
      std::string_view name) const;
  // Resolves an empty name to the default model's name.
  std::string Resolve(std::string_view name) const;

  const std::string& default_name() const { return default_name_; }
  v1::ModelInfo Describe(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  struct Loaded {
    std::unique_ptr<engine::Model> model;
    std::string tokenizer_sha256;
  };
  std::map<std::string, Loaded, std::less<>> models_;
  std::string default_name_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_MODEL_REGISTRY_H_
