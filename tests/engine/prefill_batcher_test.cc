// PrefillBatcher's group commit, with a batch function the test holds:
// reads arriving while a batch runs wait and then run together, in the
// order they came, within the batch and token limits, and every caller
// gets its own read's result.
#include "engine/executor/prefill_batcher.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

// A batch function that records each batch's reads (by their first
// token) and answers each read with {first token, batch index}; while
// `hold` is set it waits before answering.
class HeldBatches {
 public:
  std::vector<PrefillBatcher::Result> Run(absl::Span<const PrefillRead> reads) {
    std::unique_lock<std::mutex> lock(mu_);
    std::vector<int32_t> firsts;
    for (const PrefillRead& r : reads) firsts.push_back(r.tokens[0]);
    batches_.push_back(firsts);
    const float index = static_cast<float>(batches_.size() - 1);
    entered_.notify_all();
    released_.wait(lock, [this] { return !hold_; });
    std::vector<PrefillBatcher::Result> out;
    for (const PrefillRead& r : reads) {
      out.push_back(std::vector<float>{static_cast<float>(r.tokens[0]), index});
    }
    return out;
  }
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = false;
    released_.notify_all();
  }
  void WaitForBatches(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    entered_.wait(lock, [&] { return batches_.size() >= n; });
  }
  std::vector<std::vector<int32_t>> batches() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }

 private:
  std::mutex mu_;
  std::condition_variable entered_, released_;
  bool hold_ = false;
  std::vector<std::vector<int32_t>> batches_;
};

TEST(PrefillBatcherTest, AReadAloneRunsAtOnceAsABatchOfOne) {
  HeldBatches held;
  PrefillBatcher batcher(
      8, 100, [&](absl::Span<const PrefillRead> r) { return held.Run(r); });
  const std::vector<int32_t> tokens = {7, 1, 2};
  ASSERT_OK_AND_ASSIGN(std::vector<float> got, batcher.Read({tokens, nullptr}));
  EXPECT_EQ(got, (std::vector<float>{7.0f, 0.0f}));
  EXPECT_EQ(batcher.batches(), 1);
  EXPECT_EQ(batcher.batched_reads(), 0);
}

TEST(PrefillBatcherTest, ReadsArrivingDuringABatchRunTogetherAfterIt) {
  HeldBatches held;
  // At most 3 reads and 10 tokens a batch.
  PrefillBatcher batcher(
      3, 10, [&](absl::Span<const PrefillRead> r) { return held.Run(r); });
  held.Hold();
  // Read 0 starts a batch and is held in it.
  std::vector<std::vector<int32_t>> tokens = {
      {100}, {1, 0, 0, 0}, {2, 0, 0, 0}, {3, 0, 0}, {4, 0}, {5, 0, 0, 0, 0}};
  std::vector<PrefillBatcher::Result> results(tokens.size(),
                                              absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    results[0] = batcher.Read({tokens[0], nullptr});
  });
  held.WaitForBatches(1);
  // Reads 1..5 queue behind it, one at a time so their order is known.
  for (size_t i = 1; i < tokens.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = batcher.Read({tokens[i], nullptr});
    });
    while (batcher.queued() < static_cast<int64_t>(i))
      std::this_thread::yield();
  }
  held.Release();
  for (std::thread& t : threads) t.join();
  // In arrival order: {1, 2} (4 + 4 tokens; read 3 would make 11), then
  // {3, 4, 5} (3 + 2 + 5 tokens, three reads).
  const std::vector<std::vector<int32_t>> want = {{100}, {1, 2}, {3, 4, 5}};
  EXPECT_EQ(held.batches(), want);
  for (size_t i = 0; i < tokens.size(); ++i) {
    ASSERT_OK(results[i]) << i;
    EXPECT_EQ((*results[i])[0], static_cast<float>(tokens[i][0])) << i;
  }
  EXPECT_EQ((*results[2])[1], 1.0f);
  EXPECT_EQ((*results[5])[1], 2.0f);
  EXPECT_EQ(batcher.batches(), 3);
  EXPECT_EQ(batcher.batched_reads(), 5);
}

TEST(PrefillBatcherTest, AReadLongerThanTheTokenLimitRunsAlone) {
  HeldBatches held;
  PrefillBatcher batcher(
      8, 4, [&](absl::Span<const PrefillRead> r) { return held.Run(r); });
  held.Hold();
  const std::vector<int32_t> first = {9}, long_read = {1, 0, 0, 0, 0, 0},
                             after = {2};
  std::thread t0([&] { ASSERT_OK(batcher.Read({first, nullptr})); });
  held.WaitForBatches(1);
  std::thread t1([&] { ASSERT_OK(batcher.Read({long_read, nullptr})); });
  while (batcher.queued() < 1) std::this_thread::yield();
  std::thread t2([&] { ASSERT_OK(batcher.Read({after, nullptr})); });
  while (batcher.queued() < 2) std::this_thread::yield();
  held.Release();
  t0.join();
  t1.join();
  t2.join();
  const std::vector<std::vector<int32_t>> want = {{9}, {1}, {2}};
  EXPECT_EQ(held.batches(), want);
}

TEST(PrefillBatcherTest, ABatchThatThrowsFailsItsReadsAndFreesTheNext) {
  // A std::exception first, then something else.
  int calls = 0;
  PrefillBatcher batcher(8, 100, [&](absl::Span<const PrefillRead> r) {
    ++calls;
    if (calls == 1) throw std::runtime_error("out of memory");
    if (calls == 2) throw 42;
    return std::vector<PrefillBatcher::Result>(r.size(),
                                               std::vector<float>{1.0f});
  });
  const std::vector<int32_t> tokens = {1};
  for (const char* message : {"out of memory", "unknown type"}) {
    absl::StatusOr<std::vector<float>> got = batcher.Read({tokens, nullptr});
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInternal);
    EXPECT_NE(got.status().message().find(message), std::string::npos)
        << got.status();
  }
  ASSERT_OK(batcher.Read({tokens, nullptr}));
}

TEST(PrefillBatcherTest, ABatchAnsweringTooFewResultsFailsTheRestClearly) {
  PrefillBatcher batcher(8, 100, [](absl::Span<const PrefillRead>) {
    return std::vector<PrefillBatcher::Result>{};
  });
  const std::vector<int32_t> tokens = {1};
  absl::StatusOr<std::vector<float>> got = batcher.Read({tokens, nullptr});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace twice::engine
