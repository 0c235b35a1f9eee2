#include "services/orchestrator/model_cards.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/common/sha256.h"

namespace twice::services {

bool ModelCard::has_prefix_encoder() const {
  for (int mode : info_.modes()) {
    if (mode == v1::ASK_MODE_PREFIX) return true;
  }
  return false;
}

absl::Status ModelCard::CheckTokenIds(absl::Span<const int32_t> ids,
                                      std::string_view what,
                                      int64_t offset) const {
  const int32_t vocab = info_.vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(what), " token id ", ids[i], " at position ",
                       offset + static_cast<int64_t>(i),
                       " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ModelCard::NoPrefixEncoder() const {
  return absl::UnimplementedError(absl::StrCat(
      "model '", info_.name(), "' (", info_.architecture(),
      ") has no prefix encoder; prefix modes need a JRT-RNN model"));
}

std::unique_ptr<ModelCards> ModelCards::FromRegistry(
    const ModelRegistry& registry) {
  auto cards = std::make_unique<ModelCards>();
  cards->default_name_ = registry.default_name();
  for (const std::string& name : registry.names()) {
    const engine::Model* model = *registry.Find(name);
    Entry& entry = cards->entries_[name];
    entry.tokenizer = &model->tokenizer();
    entry.card = std::make_unique<const ModelCard>(registry.Describe(name),
                                                   entry.tokenizer);
  }
  return cards;
}

absl::Status ModelCards::AddTokenizerOnly(const std::string& name,
                                          const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("model '", name, "': cannot read ", path));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) {
    return absl::UnavailableError(
        absl::StrCat("model '", name, "': error reading ", path));
  }
  const std::string json = std::move(bytes).str();
  absl::StatusOr<std::unique_ptr<engine::Tokenizer>> tokenizer =
      engine::Tokenizer::FromJson(json);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat("model '", name, "': ", path, ": ",
                                     tokenizer.status().message()));
  }
  absl::MutexLock lock(&mu_);
  if (default_name_.empty()) default_name_ = name;
  Entry& entry = entries_[name];
  entry.dir = dir;
  entry.owned_tokenizer = *std::move(tokenizer);
  entry.tokenizer = entry.owned_tokenizer.get();
  entry.tokenizer_sha256 = HexSha256(json);
  entry.card.reset();
  return absl::OkStatus();
}

void ModelCards::SetDescriber(ModelDescriber describer) {
  absl::MutexLock lock(&mu_);
  describer_ = std::move(describer);
}

absl::Status ModelCards::DescribeLocked() {
  if (!describer_) {
    return absl::UnavailableError("no prefill service to describe models");
  }
  absl::StatusOr<std::vector<v1::ModelInfo>> described = describer_();
  if (!described.ok()) {
    return absl::Status(described.status().code(),
                        absl::StrCat("asking the prefill service which models "
                                     "it serves: ",
                                     described.status().message()));
  }
  for (v1::ModelInfo& info : *described) {
    auto it = entries_.find(info.name());
    if (it == entries_.end() || it->second.card != nullptr) continue;
    Entry& entry = it->second;
    // Ids made by one tokenizer and read by a model trained on another
    // would be silently wrong answers, so a mismatch is refused.
    if (info.tokenizer_sha256() != entry.tokenizer_sha256) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model '", info.name(), "': the prefill service's tokenizer.json ",
          "(sha256 ", info.tokenizer_sha256().substr(0, 16),
          ") is not the orchestrator's ", entry.dir, "/tokenizer.json (sha256 ",
          entry.tokenizer_sha256.substr(0, 16),
          "); deploy both from the same model directory"));
    }
    entry.card =
        std::make_unique<const ModelCard>(std::move(info), entry.tokenizer);
  }
  return absl::OkStatus();
}

absl::StatusOr<const ModelCard*> ModelCards::Find(std::string_view name) {
  absl::MutexLock lock(&mu_);
  auto it =
      entries_.find(name.empty() ? std::string_view(default_name_) : name);
  if (it == entries_.end()) {
    std::vector<std::string> known;
    for (const auto& [known_name, entry] : entries_)
      known.push_back(known_name);
    return absl::NotFoundError(
        absl::StrCat("unknown model '", std::string(name),
                     "'; served models: ", absl::StrJoin(known, ", ")));
  }
  if (it->second.card == nullptr) {
    absl::Status described = DescribeLocked();
    if (!described.ok()) return described;
    if (it->second.card == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("model '", it->first,
                       "' is configured here but the prefill service does "
                       "not serve it"));
    }
  }
  return it->second.card.get();
}

std::string ModelCards::Resolve(std::string_view name) const {
  return name.empty() ? default_name_ : std::string(name);
}

std::vector<std::string> ModelCards::names() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : entries_) out.push_back(name);
  return out;
}

}  // namespace twice::services
