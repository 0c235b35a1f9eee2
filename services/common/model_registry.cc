#include "services/common/model_registry.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/common/sha256.h"

namespace twice::services {

absl::Status ModelRegistry::Load(const std::string& name,
                                 const std::string& dir,
                                 const engine::LoadOptions& options) {
  absl::StatusOr<std::unique_ptr<engine::Model>> model =
      engine::LoadModel(dir, options);
  if (!model.ok()) {
    return absl::Status(model.status().code(),
                        absl::StrCat("loading model '", name, "' from ", dir,
                                     ": ", model.status().message()));
  }
  // LoadModel fingerprints these same bytes; a second read is cheap next to
  // the weights and keeps the engine's interface free of a service concern.
  std::ifstream in(dir + "/tokenizer.json", std::ios::binary);
  std::ostringstream tokenizer_json;
  tokenizer_json << in.rdbuf();
  Add(name, *std::move(model), HexSha256(tokenizer_json.str()));
  return absl::OkStatus();
}

void ModelRegistry::Add(const std::string& name,
                        std::unique_ptr<engine::Model> model,
                        std::string tokenizer_sha256) {
  if (default_name_.empty()) default_name_ = name;
  models_[name] = {std::move(model), std::move(tokenizer_sha256)};
}

absl::StatusOr<const engine::Model*> ModelRegistry::Find(
    std::string_view name) const {
  auto it = models_.find(name.empty() ? std::string_view(default_name_) : name);
  if (it == models_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown model '", std::string(name),
                     "'; served models: ", absl::StrJoin(names(), ", ")));
  }
  return it->second.model.get();
}

std::string ModelRegistry::Resolve(std::string_view name) const {
  return name.empty() ? default_name_ : std::string(name);
}

std::vector<std::string> ModelRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, model] : models_) out.push_back(name);
  return out;
}

v1::ModelInfo ModelRegistry::Describe(const std::string& name) const {
  v1::ModelInfo info;
  auto it = models_.find(name);
  if (it == models_.end()) return info;
  const engine::ModelDescription& d = it->second.model->description();
  info.set_name(name);
  info.set_architecture(d.architecture);
  info.set_fingerprint(d.fingerprint);
  info.set_vocab_size(d.vocab_size);
  info.set_training_context(d.training_context);
  info.set_state_bytes(it->second.model->NewState()->ByteSize());
  info.set_tokenizer_sha256(it->second.tokenizer_sha256);
  info.add_modes(v1::ASK_MODE_DEFAULT);
  info.add_modes(v1::ASK_MODE_READ_TWICE);
  info.add_modes(v1::ASK_MODE_READ_TWICE_FULL);
  if (d.prefix_length > 0) {
    info.add_modes(v1::ASK_MODE_PREFIX);
    info.add_modes(v1::ASK_MODE_PREFIX_WITH_QUESTION);
  }
  return info;
}

}  // namespace twice::services
