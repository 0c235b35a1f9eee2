#include "bench/harness/load_ledger.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/harness/bench_common.h"
#include "services/common/grpc_status.h"

namespace twice::bench {
namespace {

constexpr size_t kExamples = 5;  // of each kind, for the report

// A failure the client can act on: a code other than UNKNOWN or INTERNAL,
// with a message.
bool IsClean(const grpc::Status& status) {
  return status.error_code() != grpc::StatusCode::UNKNOWN &&
         status.error_code() != grpc::StatusCode::INTERNAL &&
         !status.error_message().empty();
}

}  // namespace

std::string LoadModeName(v1::AskMode mode) {
  std::string name = v1::AskMode_Name(mode);
  if (absl::StartsWith(name, "ASK_MODE_")) name = name.substr(9);
  return absl::AsciiStrToLower(name);
}

void LoadLedger::Finish(const std::string& op, Clock::time_point start,
                        const grpc::Status& status, double ttft_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  LoadOpStats& stats = result_.ops[op];
  stats.calls += 1;
  stats.latency_ms.push_back(MillisSince(start));
  if (status.ok()) {
    stats.ok += 1;
    if (ttft_ms >= 0) stats.ttft_ms.push_back(ttft_ms);
    return;
  }
  const std::string code =
      absl::StatusCodeToString(services::FromGrpcStatus(status).code());
  result_.errors[code] += 1;
  if (!IsClean(status)) {
    result_.unclean_errors += 1;
    if (result_.unclean_examples.size() < kExamples) {
      result_.unclean_examples.push_back(
          absl::StrCat(op, ": ", code, " '", status.error_message(), "'"));
    }
  }
}

void LoadLedger::Lost(const LoadSlot& slot, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  result_.documents_lost += 1;
  if (result_.lost_examples.size() < kExamples) {
    result_.lost_examples.push_back(absl::StrCat(slot.id, ": ", why));
  }
}

void LoadLedger::RecordAnswer(const LoadSlot& slot, int question,
                              v1::AskMode mode,
                              const std::vector<int32_t>& answer) {
  const std::string key =
      LoadAnswerKey(slot.slot, slot.appends, question, LoadModeName(mode));
  const AnswerBook::Verdict v = book_->Record(key, answer);
  std::lock_guard<std::mutex> lock(mu_);
  if (v.compared_to_baseline) result_.answers_compared_to_baseline += 1;
  if (v.differs_in_run) result_.answers_differ_in_run += 1;
  if (v.differs_from_baseline) result_.answers_differ_from_baseline += 1;
  if ((v.differs_in_run || v.differs_from_baseline) &&
      result_.differ_examples.size() < kExamples) {
    result_.differ_examples.push_back(absl::StrCat(
        key, " -> [", absl::StrJoin(answer, ","), "]",
        v.differs_in_run ? " (differs in run)" : "",
        v.differs_from_baseline ? " (differs from baseline)" : ""));
  }
}

void LoadLedger::CountRecomputed(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  result_.states_recomputed += n;
}

void LoadLedger::Reconcile(LoadSlot& slot, bool found, int64_t tokens) {
  slot.in_doubt = false;
  if (!found) {
    if (slot.acknowledged && !slot.maybe_deleted) {
      Lost(slot, absl::StrCat("NOT_FOUND after ", slot.acknowledged_appends,
                              " acknowledged appends"));
    }
    slot.exists = false;
    slot.acknowledged = false;
  } else {
    const int appends = LoadAppendsForLength(shape_, tokens);
    const bool expected =
        appends >= 0 &&
        (!slot.acknowledged || appends == slot.acknowledged_appends ||
         (slot.maybe_appended && appends == slot.acknowledged_appends + 1));
    if (!expected) {
      Lost(slot,
           absl::StrCat("has ", tokens, " tokens, acknowledged ",
                        slot.acknowledged
                            ? shape_.doc_tokens + shape_.append_tokens *
                                                      slot.acknowledged_appends
                            : int64_t{0}));
    }
    slot.exists = true;
    if (appends < 0) {
      slot.in_doubt = true;
      slot.acknowledged = false;
    } else {
      slot.appends = appends;
      slot.acknowledged = slot.ever_acknowledged = true;
      slot.acknowledged_appends = appends;
    }
  }
  slot.maybe_deleted = false;
  slot.maybe_appended = false;
}

void LoadLedger::CheckNotFound(LoadSlot& slot, const grpc::Status& status) {
  if (status.error_code() == grpc::StatusCode::NOT_FOUND && slot.acknowledged &&
      !slot.maybe_deleted) {
    Lost(slot, absl::StrCat("NOT_FOUND: ", status.error_message()));
    slot.acknowledged = false;
  }
}

void LoadLedger::Verified(const LoadSlot& slot) {
  std::lock_guard<std::mutex> lock(mu_);
  result_.documents_verified += 1;
  if (slot.ever_acknowledged) result_.documents_acknowledged += 1;
}

LoadBenchResult LoadLedger::Result() const {
  std::lock_guard<std::mutex> lock(mu_);
  LoadBenchResult r = result_;
  r.answers = book_->answers();
  r.answer_keys = book_->keys();
  return r;
}

absl::Status LoadBenchResult::Verdict() const {
  std::vector<std::string> broken;
  if (documents_lost > 0) {
    broken.push_back(
        absl::StrCat(documents_lost, " acknowledged documents lost"));
  }
  if (answers_differ_in_run > 0 || answers_differ_from_baseline > 0) {
    broken.push_back(
        absl::StrCat(answers_differ_in_run + answers_differ_from_baseline,
                     " greedy answers changed"));
  }
  if (unclean_errors > 0) {
    broken.push_back(
        absl::StrCat(unclean_errors, " calls failed without a clean status"));
  }
  if (broken.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("load: ", absl::StrJoin(broken, "; ")));
}

}  // namespace twice::bench
