// LoadLedger: what `twice-bench load` knows of its documents and what it
// has seen of the server, apart from the calls that drive the load
// (load_bench.cc). Each client's document slot records what the server
// acknowledged; the ledger compares what the server later reports against
// it (a lost document), counts every call by operation and status code (a
// failure without a clean status), and files each greedy answer in the
// answer book (an answer that changed). Thread-safe: the load's callbacks
// run on gRPC's threads; a slot is only touched by its own client.
#ifndef TWICE_BENCH_HARNESS_LOAD_LEDGER_H_
#define TWICE_BENCH_HARNESS_LOAD_LEDGER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench/harness/load_bench.h"
#include "bench/harness/load_workload.h"
#include "grpcpp/support/status.h"
#include "twice/v1/orchestrator.pb.h"

namespace twice::bench {

// What a client knows of one of its documents, and what the server has
// acknowledged of it (the loss check compares the two).
struct LoadSlot {
  int slot = 0;
  std::string id;
  bool exists = false;
  int appends = 0;        // valid when exists && !in_doubt
  bool in_doubt = false;  // a call that may have changed it failed
  // Acknowledged by an OK ingest or append (or seen by GetDocument) and not
  // deleted since, with this many appends.
  bool acknowledged = false;
  bool ever_acknowledged = false;
  int acknowledged_appends = 0;
  bool maybe_deleted = false;   // a delete failed: it may have happened
  bool maybe_appended = false;  // an append failed: it may have happened
};

// "default", "read_twice", ...: an ask mode as the report and the answer
// keys name it.
std::string LoadModeName(v1::AskMode mode);

class LoadLedger {
 public:
  using Clock = std::chrono::steady_clock;

  // `book` files the answers (it may hold a baseline).
  LoadLedger(const LoadWorkloadShape& shape, std::unique_ptr<AnswerBook> book)
      : shape_(shape), book_(std::move(book)) {}

  // A call of `op` that started at `start` ended with `status` (its first
  // token after ttft_ms, for asks that streamed one).
  void Finish(const std::string& op, Clock::time_point start,
              const grpc::Status& status, double ttft_ms = -1);
  // An acknowledged document the server lost, and why the ledger says so.
  void Lost(const LoadSlot& slot, const std::string& why);
  // A greedy answer to question `question` of the slot's document as it
  // stands, asked in `mode`.
  void RecordAnswer(const LoadSlot& slot, int question, v1::AskMode mode,
                    const std::vector<int32_t>& answer);
  // States the server recomputed for an answer.
  void CountRecomputed(int64_t n);
  // A document's length as the server reports it (`found` false: NOT_FOUND),
  // against what was acknowledged. Updates the slot to what the server
  // holds; a length this workload cannot produce leaves the slot in doubt.
  void Reconcile(LoadSlot& slot, bool found, int64_t tokens);
  // A failed call on an acknowledged document that says it is gone.
  void CheckNotFound(LoadSlot& slot, const grpc::Status& status);
  // The final check read the slot's document.
  void Verified(const LoadSlot& slot);

  // The result so far, with the answer book's counts; `model` and
  // `seconds` are the caller's.
  LoadBenchResult Result() const;
  absl::Status SaveAnswers(const std::string& path) const {
    return book_->Save(path);
  }

 private:
  const LoadWorkloadShape shape_;
  const std::unique_ptr<AnswerBook> book_;
  mutable std::mutex mu_;
  LoadBenchResult result_;  // guarded by mu_
};

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_LOAD_LEDGER_H_
