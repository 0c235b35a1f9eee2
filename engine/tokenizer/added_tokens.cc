#include "engine/tokenizer/added_tokens.h"

#include <algorithm>
#include <utility>

namespace twice::engine {

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) {
  for (AddedToken& token : tokens) {
    if (!token.content.empty()) tokens_.push_back(std::move(token));
  }
  // Longest first, so that at one position the longest token wins.
  std::stable_sort(tokens_.begin(), tokens_.end(),
                   [](const AddedToken& a, const AddedToken& b) {
                     return a.content.size() > b.content.size();
                   });
}

std::vector<TextSegment> AddedTokenMatcher::Split(std::string_view text) const {
  std::vector<TextSegment> segments;
  if (tokens_.empty()) {
    if (!text.empty()) segments.push_back({text, -1});
    return segments;
  }
  // Next occurrence of each token at or after `pos`; recomputed only when
  // the cursor has passed it, so the text is scanned about once per token.
  std::vector<size_t> next(tokens_.size(), 0);
  for (size_t t = 0; t < tokens_.size(); ++t) {
    next[t] = text.find(tokens_[t].content);
  }
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string_view::npos;
    size_t best_token = 0;
    for (size_t t = 0; t < tokens_.size(); ++t) {
      if (next[t] != std::string_view::npos && next[t] < pos) {
        next[t] = text.find(tokens_[t].content, pos);
      }
      // Strictly smaller: among equal positions the longer (earlier) wins.
      if (next[t] < best) {
        best = next[t];
        best_token = t;
      }
    }
    if (best == std::string_view::npos) break;
    if (best > pos) segments.push_back({text.substr(pos, best - pos), -1});
    segments.push_back({text.substr(best, tokens_[best_token].content.size()),
                        tokens_[best_token].id});
    pos = best + tokens_[best_token].content.size();
  }
  if (pos < text.size()) segments.push_back({text.substr(pos), -1});
  return segments;
}

}  // namespace twice::engine
