// Byte-level BPE as GPT-2 uses it: text is cut at added tokens, split by the
// GPT-2 pattern (gpt2_pretokenizer.h), each piece's bytes start as one symbol
// each (the byte-level alphabet, byte_level_alphabet.h) and adjacent symbols
// are merged lowest merge rank first until no ranked pair is left.
#ifndef TWICE_ENGINE_TOKENIZER_BPE_TOKENIZER_H_
#define TWICE_ENGINE_TOKENIZER_BPE_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocabulary.h"

namespace twice::engine {

struct BpeOptions {
  // Token strings in the byte-level alphabet, and their ids.
  std::vector<std::pair<std::string, int32_t>> vocab;
  // Merge rules, lowest rank (highest priority) first. When a pair repeats,
  // the later rank wins, as in the reference implementations.
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<AddedToken> added_tokens;
  // Prepend a space to each run of text that does not start with one.
  // Default false (GPT-2).
  bool add_prefix_space = false;
  // Split with the GPT-2 pattern before BPE. Default true.
  bool use_regex = true;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // INVALID_ARGUMENT when the vocabulary lacks a token for one of the 256
  // bytes, or a merge names a token (or yields one) not in the vocabulary.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Create(
      BpeOptions options);

  absl::StatusOr<std::vector<int32_t>> Encode(
      std::string_view text) const override;
  absl::StatusOr<std::string> Decode(
      absl::Span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return vocab_.size(); }
  std::optional<int32_t> TokenToId(std::string_view token) const override {
    return vocab_.Find(token);
  }
  std::string_view kind() const override { return "bpe"; }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };

  explicit BpeTokenizer(Vocabulary vocab) : vocab_(std::move(vocab)) {}

  // Appends the ids of one pre-tokenized piece.
  void EncodePiece(std::string_view piece, std::vector<int32_t>& ids) const;
  void MergePiece(std::string_view piece, std::vector<int32_t>& ids) const;

  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  Vocabulary vocab_;
  AddedTokenMatcher added_;
  bool add_prefix_space_ = false;
  bool use_regex_ = true;
  std::array<int32_t, 256> byte_ids_{};
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<std::string> id_bytes_;  // what each id decodes to

  // Recently encoded pieces. Words repeat a lot in text, and a lookup is
  // much cheaper than the merge loop. Bounded: cleared when full.
  static constexpr size_t kCacheEntries = 16384;
  static constexpr size_t kCacheMaxPieceBytes = 64;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_TOKENIZER_BPE_TOKENIZER_H_
