// Vocabulary: the token strings of a tokenizer and their ids, model
// vocabulary and added tokens together. Immutable once built.
#ifndef TWICE_ENGINE_TOKENIZER_VOCABULARY_H_
#define TWICE_ENGINE_TOKENIZER_VOCABULARY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/added_tokens.h"

namespace twice::engine {

class Vocabulary {
 public:
  // Largest id accepted; anything above is a broken file, and refusing it
  // keeps a bad id from sizing a huge table.
  static constexpr int32_t kMaxId = (1 << 24) - 1;

  // INVALID_ARGUMENT on a negative or too large id, or on two model tokens
  // sharing an id. An added token may repeat a model token's id (GPT-2 lists
  // <|endoftext|> in both); its content then wins for Token().
  [[nodiscard]] static absl::StatusOr<Vocabulary> Create(
      std::vector<std::pair<std::string, int32_t>> model_tokens,
      const std::vector<AddedToken>& added_tokens);

  std::optional<int32_t> Find(std::string_view token) const;
  // The token string of `id`, or nullptr if no token has that id.
  const std::string* Token(int32_t id) const;
  // True if `id` is an added token (its text is not in the model's alphabet).
  bool IsAdded(int32_t id) const;
  // Largest id + 1.
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const {
      return std::hash<std::string_view>{}(s);
    }
  };

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids_;
  std::vector<std::optional<std::string>> tokens_;  // indexed by id
  std::vector<bool> added_;                         // indexed by id
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_TOKENIZER_VOCABULARY_H_
