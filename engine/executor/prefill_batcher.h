// PrefillBatcher: group commit for the short reads of one executor.
//
// Concurrent callers each bring one read (a question's prompt, an
// appended segment). A read runs at once when no batch is running; reads
// that arrive while one runs wait, and when it ends one of the waiting
// callers runs the front of the queue as the next batch (first come,
// first in, up to `max_batch` reads and `max_tokens` tokens, at least one
// read). There is no timer: a read never waits for company, only for the
// device it would have waited for anyway (the executor serves one call at
// a time), behind the batches of the reads that came before it.
//
// `run` reads a batch and returns one result per read, in order; it runs
// on the thread of one of the batch's callers, without the batcher's
// lock (an exception it throws becomes every read's INTERNAL error).
// Thread-safe.
#ifndef TWICE_ENGINE_EXECUTOR_PREFILL_BATCHER_H_
#define TWICE_ENGINE_EXECUTOR_PREFILL_BATCHER_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/state/sequence_state.h"

namespace twice::engine {

struct PrefillRead {
  absl::Span<const int32_t> tokens;
  SequenceState* state = nullptr;
};

class PrefillBatcher {
 public:
  using Result = absl::StatusOr<std::vector<float>>;
  using RunBatch =
      std::function<std::vector<Result>(absl::Span<const PrefillRead>)>;

  // max_batch >= 1, max_tokens >= 1.
  PrefillBatcher(int64_t max_batch, int64_t max_tokens, RunBatch run);

  // `read`'s result, once a batch holding it has run.
  Result Read(const PrefillRead& read);

  // Reads waiting for a batch now (tests), batches run, and reads that ran
  // in a batch of more than one.
  int64_t queued() const;
  int64_t batches() const;
  int64_t batched_reads() const;

 private:
  struct Waiter {
    PrefillRead read;
    std::optional<Result> result;
  };
  // The front of the queue that the next batch takes (mu_ held).
  std::vector<Waiter*> TakeBatch();
  static std::vector<Result> FailedResults(size_t reads,
                                           const char* what) noexcept;

  const int64_t max_batch_;
  const int64_t max_tokens_;
  const RunBatch run_;
  mutable std::mutex mu_;
  std::condition_variable done_;
  std::deque<Waiter*> queue_;
  bool running_ = false;
  int64_t batches_ = 0;
  int64_t batched_reads_ = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_EXECUTOR_PREFILL_BATCHER_H_
