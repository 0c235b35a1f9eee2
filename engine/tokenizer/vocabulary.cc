#include "engine/tokenizer/vocabulary.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace twice::engine {
namespace {

absl::Status CheckId(int32_t id, const std::string& token) {
  if (id < 0 || id > Vocabulary::kMaxId) {
    return absl::InvalidArgumentError(
        absl::StrCat("token \"", token, "\" has id ", id, ", outside [0, ",
                     Vocabulary::kMaxId, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Vocabulary> Vocabulary::Create(
    std::vector<std::pair<std::string, int32_t>> model_tokens,
    const std::vector<AddedToken>& added_tokens) {
  int32_t max_id = -1;
  for (const auto& [token, id] : model_tokens) {
    if (absl::Status s = CheckId(id, token); !s.ok()) return s;
    max_id = std::max(max_id, id);
  }
  for (const AddedToken& token : added_tokens) {
    if (absl::Status s = CheckId(token.id, token.content); !s.ok()) return s;
    max_id = std::max(max_id, token.id);
  }

  Vocabulary vocab;
  vocab.tokens_.resize(static_cast<size_t>(max_id) + 1);
  vocab.added_.resize(static_cast<size_t>(max_id) + 1, false);
  vocab.ids_.reserve(model_tokens.size() + added_tokens.size());
  for (auto& [token, id] : model_tokens) {
    std::optional<std::string>& slot = vocab.tokens_[id];
    if (slot.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokens \"", *slot, "\" and \"", token, "\" share id ", id));
    }
    slot = token;
    vocab.ids_.emplace(std::move(token), id);
  }
  for (const AddedToken& token : added_tokens) {
    vocab.tokens_[token.id] = token.content;
    vocab.added_[token.id] = true;
    vocab.ids_[token.content] = token.id;
  }
  return vocab;
}

std::optional<int32_t> Vocabulary::Find(std::string_view token) const {
  const auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string* Vocabulary::Token(int32_t id) const {
  if (id < 0 || id >= size() || !tokens_[id].has_value()) return nullptr;
  return &*tokens_[id];
}

bool Vocabulary::IsAdded(int32_t id) const {
  return id >= 0 && id < size() && added_[id];
}

}  // namespace twice::engine
