// The deterministic workload of `twice-bench load`: what each document
// slot contains after each append, the questions asked of it, and the book
// of greedy answers that every later answer to the same question must
// match.
//
// A slot's content is a pure function of (slot, appends applied), so two
// runs, or one run before and after a fault, ask exactly the same
// questions of exactly the same token sequences, and a greedy answer that
// differs is a defect, not noise. Token ids are drawn from the model's
// whole vocabulary by a seeded generator (SplitMix64), never from a
// tokenizer, so the content does not depend on text handling.
#ifndef TWICE_BENCH_HARNESS_LOAD_WORKLOAD_H_
#define TWICE_BENCH_HARNESS_LOAD_WORKLOAD_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace twice::bench {

struct LoadWorkloadShape {
  // Tokens of a freshly ingested document. Default: 256.
  int64_t doc_tokens = 256;
  // Tokens each append adds. Default: 64.
  int64_t append_tokens = 64;
  // Appends a document takes before it is only read (and eventually
  // deleted and ingested again). Default: 3.
  int max_appends = 3;
  // Distinct questions per document slot. Default: 3.
  int questions_per_doc = 3;
  // Tokens per question. Default: 6.
  int question_tokens = 6;
  // Token ids are below this (the model's vocabulary). Required.
  int32_t vocab_size = 0;
};

// The document slot's tokens as ingested (before any append).
std::vector<int32_t> LoadDocumentTokens(const LoadWorkloadShape& shape,
                                        int slot);
// The tokens of append number `index` (1-based) of `slot`.
std::vector<int32_t> LoadAppendTokens(const LoadWorkloadShape& shape, int slot,
                                      int index);
// Question `question` (0-based) of `slot`.
std::vector<int32_t> LoadQuestionTokens(const LoadWorkloadShape& shape,
                                        int slot, int question);
// Appends applied to a document of `tokens` tokens, or -1 when `tokens` is
// not a length this workload can produce (a damaged document).
int LoadAppendsForLength(const LoadWorkloadShape& shape, int64_t tokens);

// Names one greedy question: slot, appends applied, question, ask mode.
std::string LoadAnswerKey(int slot, int appends, int question,
                          const std::string& mode);

// Greedy answers by key. Thread-safe.
class AnswerBook {
 public:
  struct Verdict {
    bool differs_in_run = false;        // from an earlier answer of this run
    bool compared_to_baseline = false;  // the baseline has this key
    bool differs_from_baseline = false;
  };

  // `signature` names everything an answer depends on besides its key
  // (model fingerprint, shape, answer length); a baseline written under
  // another signature is refused.
  explicit AnswerBook(std::string signature)
      : signature_(std::move(signature)) {}

  // Reads a baseline written by Save. INVALID_ARGUMENT when it is not one,
  // FAILED_PRECONDITION when its signature differs.
  [[nodiscard]] absl::Status LoadBaseline(const std::string& path);
  // Writes every answer of this run (the first one seen per key).
  [[nodiscard]] absl::Status Save(const std::string& path) const;

  Verdict Record(const std::string& key, const std::vector<int32_t>& answer);

  int64_t answers() const;
  int64_t keys() const;

 private:
  const std::string signature_;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<int32_t>> run_;
  std::map<std::string, std::vector<int32_t>> baseline_;
  int64_t answers_ = 0;
};

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_LOAD_WORKLOAD_H_
