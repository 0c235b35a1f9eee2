#include "bench/harness/load_workload.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace twice::bench {
namespace {

// SplitMix64: a tiny, well-mixed generator whose output is fixed by its
// seed on every platform (std::uniform_int_distribution is not).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// `count` ids below `vocab` from the stream named by (kind, slot, index).
std::vector<int32_t> Draw(int32_t vocab, int64_t count, uint64_t kind, int slot,
                          int index) {
  SplitMix64 rng((kind << 56) ^ (static_cast<uint64_t>(slot) << 24) ^
                 static_cast<uint64_t>(index));
  std::vector<int32_t> out(static_cast<size_t>(count));
  for (int32_t& id : out) {
    id = static_cast<int32_t>(rng.Next() % static_cast<uint64_t>(vocab));
  }
  return out;
}

constexpr uint64_t kDocumentStream = 1;
constexpr uint64_t kAppendStream = 2;
constexpr uint64_t kQuestionStream = 3;

}  // namespace

std::vector<int32_t> LoadDocumentTokens(const LoadWorkloadShape& shape,
                                        int slot) {
  return Draw(shape.vocab_size, shape.doc_tokens, kDocumentStream, slot, 0);
}

std::vector<int32_t> LoadAppendTokens(const LoadWorkloadShape& shape, int slot,
                                      int index) {
  return Draw(shape.vocab_size, shape.append_tokens, kAppendStream, slot,
              index);
}

std::vector<int32_t> LoadQuestionTokens(const LoadWorkloadShape& shape,
                                        int slot, int question) {
  return Draw(shape.vocab_size, shape.question_tokens, kQuestionStream, slot,
              question);
}

int LoadAppendsForLength(const LoadWorkloadShape& shape, int64_t tokens) {
  const int64_t extra = tokens - shape.doc_tokens;
  if (extra < 0 || extra % shape.append_tokens != 0) return -1;
  const int64_t appends = extra / shape.append_tokens;
  return appends <= shape.max_appends ? static_cast<int>(appends) : -1;
}

std::string LoadAnswerKey(int slot, int appends, int question,
                          const std::string& mode) {
  return absl::StrCat("s", slot, "/a", appends, "/q", question, "/", mode);
}

absl::Status AnswerBook::LoadBaseline(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json doc =
      nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("signature") ||
      !doc["signature"].is_string() || !doc.contains("answers") ||
      !doc["answers"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a load-bench answer file (signature, answers)"));
  }
  if (doc["signature"].get<std::string>() != signature_) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " was written for another model or workload: its signature is ",
        doc["signature"].get<std::string>(), ", this run's is ", signature_));
  }
  std::map<std::string, std::vector<int32_t>> baseline;
  for (const auto& [key, value] : doc["answers"].items()) {
    if (!value.is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": answer ", key, " is not an array of ids"));
    }
    std::vector<int32_t> ids;
    for (const nlohmann::json& id : value) {
      if (!id.is_number_integer()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": answer ", key, " holds a non-integer"));
      }
      ids.push_back(id.get<int32_t>());
    }
    baseline[key] = std::move(ids);
  }
  std::lock_guard<std::mutex> lock(mu_);
  baseline_ = std::move(baseline);
  return absl::OkStatus();
}

absl::Status AnswerBook::Save(const std::string& path) const {
  nlohmann::json answers = nlohmann::json::object();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, ids] : run_) answers[key] = ids;
  }
  const nlohmann::json doc = {{"signature", signature_}, {"answers", answers}};
  // Written beside the target and renamed, so a crash leaves the old file.
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << doc.dump(1) << "\n";
    if (!out.flush()) {
      return absl::InternalError(absl::StrCat("cannot write ", temp));
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", temp));
  }
  return absl::OkStatus();
}

AnswerBook::Verdict AnswerBook::Record(const std::string& key,
                                       const std::vector<int32_t>& answer) {
  std::lock_guard<std::mutex> lock(mu_);
  answers_ += 1;
  Verdict verdict;
  auto [it, inserted] = run_.emplace(key, answer);
  verdict.differs_in_run = !inserted && it->second != answer;
  auto base = baseline_.find(key);
  if (base != baseline_.end()) {
    verdict.compared_to_baseline = true;
    verdict.differs_from_baseline = base->second != answer;
  }
  return verdict;
}

int64_t AnswerBook::answers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return answers_;
}

int64_t AnswerBook::keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(run_.size());
}

}  // namespace twice::bench
