#include "services/common/model_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
  Add(name, *std::move(model));
  return absl::OkStatus();
}

void ModelRegistry::Add(const std::string& name,
                        std::unique_ptr<engine::Model> model) {
  if (default_name_.empty()) default_name_ = name;
  models_[name] = std::move(model);
}

absl::StatusOr<const engine::Model*> ModelRegistry::Find(
    std::string_view name) const {
  auto it = models_.find(name.empty() ? std::string_view(default_name_) : name);
  if (it == models_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown model '", std::string(name),
                     "'; served models: ", absl::StrJoin(names(), ", ")));
  }
  return it->second.get();
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
  const engine::ModelDescription& d = it->second->description();
  info.set_name(name);
  info.set_architecture(d.architecture);
  info.set_fingerprint(d.fingerprint);
  info.set_vocab_size(d.vocab_size);
  info.set_training_context(d.training_context);
  info.set_state_bytes(it->second->NewState()->ByteSize());
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
