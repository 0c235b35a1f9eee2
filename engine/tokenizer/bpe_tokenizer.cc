#include "engine/tokenizer/bpe_tokenizer.h"

#include <queue>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/tokenizer/byte_level_alphabet.h"
#include "engine/tokenizer/gpt2_pretokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(
    BpeOptions options) {
  absl::StatusOr<Vocabulary> vocab =
      Vocabulary::Create(std::move(options.vocab), options.added_tokens);
  if (!vocab.ok()) return vocab.status();
  std::unique_ptr<BpeTokenizer> tokenizer(new BpeTokenizer(*std::move(vocab)));
  const Vocabulary& v = tokenizer->vocab_;

  // Every byte needs a token, or Encode could meet text it cannot express.
  for (int byte = 0; byte < 256; ++byte) {
    std::string symbol;
    AppendUtf8(ByteToCodePoint(static_cast<uint8_t>(byte)), symbol);
    const std::optional<int32_t> id = v.Find(symbol);
    if (!id.has_value()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "vocab has no token \"%s\" for byte 0x%02x; only byte-level BPE "
          "vocabularies are supported",
          symbol, byte));
    }
    tokenizer->byte_ids_[byte] = *id;
  }

  tokenizer->merges_.reserve(options.merges.size());
  for (size_t rank = 0; rank < options.merges.size(); ++rank) {
    const auto& [left, right] = options.merges[rank];
    const std::optional<int32_t> left_id = v.Find(left);
    const std::optional<int32_t> right_id = v.Find(right);
    const std::optional<int32_t> merged_id = v.Find(absl::StrCat(left, right));
    if (!left_id || !right_id || !merged_id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "merge ", rank, " (\"", left, " ", right, "\"): token \"",
          !left_id ? left : (!right_id ? right : absl::StrCat(left, right)),
          "\" is not in the vocab"));
    }
    tokenizer->merges_[PairKey(*left_id, *right_id)] = {
        static_cast<int32_t>(rank), *merged_id};
  }

  tokenizer->id_bytes_.resize(v.size());
  for (int32_t id = 0; id < v.size(); ++id) {
    const std::string* token = v.Token(id);
    if (token == nullptr) continue;
    if (v.IsAdded(id)) {
      tokenizer->id_bytes_[id] = *token;  // added tokens are literal text
    } else {
      // A character outside the alphabet passes through as its own UTF-8,
      // as HuggingFace's ByteLevel decoder does.
      ByteLevelToBytes(*token, tokenizer->id_bytes_[id]);
    }
  }

  tokenizer->added_ = AddedTokenMatcher(std::move(options.added_tokens));
  tokenizer->add_prefix_space_ = options.add_prefix_space;
  tokenizer->use_regex_ = options.use_regex;
  return tokenizer;
}

absl::StatusOr<std::vector<int32_t>> BpeTokenizer::Encode(
    std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  std::string prefixed;
  for (const TextSegment& segment : added_.Split(text)) {
    if (segment.added_id >= 0) {
      ids.push_back(segment.added_id);
      continue;
    }
    std::string_view run = segment.text;
    if (add_prefix_space_ && run.front() != ' ') {
      prefixed.assign(1, ' ');
      prefixed.append(run);
      run = prefixed;
    }
    if (!use_regex_) {
      EncodePiece(run, ids);
      continue;
    }
    for (const std::string_view piece : SplitGpt2(run)) {
      EncodePiece(piece, ids);
    }
  }
  return ids;
}

void BpeTokenizer::EncodePiece(std::string_view piece,
                               std::vector<int32_t>& ids) const {
  if (piece.size() == 1) {
    ids.push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  const bool cacheable = piece.size() <= kCacheMaxPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(std::string(piece));
    if (it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = ids.size();
  MergePiece(piece, ids);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheEntries) cache_.clear();
    cache_.emplace(std::string(piece),
                   std::vector<int32_t>(ids.begin() + first, ids.end()));
  }
}

// The merge loop over a doubly linked list of symbols with a min-heap of
// candidate pairs ordered by (rank, position): O(n log n) per piece. A heap
// entry goes stale when either of its symbols has been merged away; it is
// skipped on pop by checking that the pair at that position still merges to
// the same token.
void BpeTokenizer::MergePiece(std::string_view piece,
                              std::vector<int32_t>& ids) const {
  struct Symbol {
    int32_t id;
    int prev;
    int next;  // -1 at the ends
    bool alive;
  };
  struct Candidate {
    int32_t rank;
    int pos;
    int32_t merged_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : pos > other.pos;
    }
  };

  const int n = static_cast<int>(piece.size());
  std::vector<Symbol> symbols(n);
  for (int i = 0; i < n; ++i) {
    symbols[i] = {byte_ids_[static_cast<uint8_t>(piece[i])], i - 1,
                  i + 1 < n ? i + 1 : -1, true};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push_pair = [&](int pos) {
    const int next = symbols[pos].next;
    if (next < 0) return;
    const auto it = merges_.find(PairKey(symbols[pos].id, symbols[next].id));
    if (it != merges_.end()) {
      heap.push({it->second.rank, pos, it->second.merged_id});
    }
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);

  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    const auto it = merges_.find(PairKey(left.id, symbols[left.next].id));
    if (it == merges_.end() || it->second.merged_id != top.merged_id ||
        it->second.rank != top.rank) {
      continue;
    }
    // Absorb the right symbol into the left one.
    Symbol& right = symbols[left.next];
    right.alive = false;
    left.id = top.merged_id;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }

  for (int i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
}

absl::StatusOr<std::string> BpeTokenizer::Decode(
    absl::Span<const int32_t> ids) const {
  std::string bytes;
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_.size() || vocab_.Token(id) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is not in the vocabulary (size ",
                       vocab_.size(), ")"));
    }
    bytes += id_bytes_[id];
  }
  return bytes;
}

}  // namespace twice::engine
