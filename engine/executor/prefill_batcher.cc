#include "engine/executor/prefill_batcher.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"

namespace twice::engine {

PrefillBatcher::PrefillBatcher(int64_t max_batch, int64_t max_tokens,
                               RunBatch run)
    : max_batch_(std::max<int64_t>(max_batch, 1)),
      max_tokens_(std::max<int64_t>(max_tokens, 1)),
      run_(std::move(run)) {}

std::vector<PrefillBatcher::Waiter*> PrefillBatcher::TakeBatch() {
  std::vector<Waiter*> batch;
  int64_t tokens = 0;
  while (!queue_.empty() && static_cast<int64_t>(batch.size()) < max_batch_) {
    const int64_t n = static_cast<int64_t>(queue_.front()->read.tokens.size());
    if (!batch.empty() && tokens + n > max_tokens_) break;
    tokens += n;
    batch.push_back(queue_.front());
    queue_.pop_front();
  }
  return batch;
}

// What every read of a batch whose run threw gets. Fills what it can when
// even that runs out of memory: the publishing loop answers the rest.
std::vector<PrefillBatcher::Result> PrefillBatcher::FailedResults(
    size_t reads, const char* what) noexcept {
  std::vector<Result> results;
  try {
    results.assign(
        reads, absl::InternalError(absl::StrCat("reading a batch of ", reads,
                                                " prefills failed: ", what)));
  } catch (...) {
    results.clear();
  }
  return results;
}

PrefillBatcher::Result PrefillBatcher::Read(const PrefillRead& read) {
  Waiter me{read, std::nullopt};
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&me);
  while (!me.result.has_value()) {
    if (running_) {
      done_.wait(lock);
      continue;
    }
    // The device is free: this caller runs the queue's front, its own
    // read included unless the queue ahead of it fills the batch.
    running_ = true;
    std::vector<Waiter*> batch = TakeBatch();
    lock.unlock();
    // Answered, never thrown through: the other callers of the batch wait
    // on this thread, and this caller's own read may not be in it.
    std::vector<Result> results;
    try {
      std::vector<PrefillRead> reads;
      reads.reserve(batch.size());
      for (const Waiter* w : batch) reads.push_back(w->read);
      results = run_(reads);
      if (results.size() != batch.size()) {
        results.resize(batch.size(),
                       absl::InternalError(absl::StrCat(
                           "a batch of ", batch.size(), " reads returned ",
                           results.size(), " results")));
      }
    } catch (const std::exception& e) {
      results = FailedResults(batch.size(), e.what());
    } catch (...) {
      results = FailedResults(batch.size(), "an exception of unknown type");
    }
    lock.lock();
    for (size_t i = 0; i < batch.size(); ++i) {
      // Without a result only when even the error could not be built (no
      // memory): a code-only status allocates nothing.
      batch[i]->result = i < results.size()
                             ? std::move(results[i])
                             : Result(absl::Status(absl::StatusCode::kInternal,
                                                   absl::string_view()));
    }
    ++batches_;
    if (batch.size() > 1) {
      batched_reads_ += static_cast<int64_t>(batch.size());
    }
    running_ = false;
    done_.notify_all();
  }
  return *std::move(me.result);
}

int64_t PrefillBatcher::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(queue_.size());
}

int64_t PrefillBatcher::batches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batches_;
}

int64_t PrefillBatcher::batched_reads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batched_reads_;
}

}  // namespace twice::engine
