// DelayScheduler: runs functions after a delay on one thread of its own, so
// code on a gRPC callback thread (which must not sleep) can say "try again
// in 200 ms". Thread-safe. The destructor drops what has not run yet.
#ifndef TWICE_BENCH_HARNESS_DELAY_SCHEDULER_H_
#define TWICE_BENCH_HARNESS_DELAY_SCHEDULER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <utility>
#include <vector>

namespace twice::bench {

class DelayScheduler {
 public:
  DelayScheduler() : thread_([this] { Loop(); }) {}
  ~DelayScheduler() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void After(std::chrono::milliseconds delay, std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push(
          {std::chrono::steady_clock::now() + delay, seq_++, std::move(fn)});
    }
    cv_.notify_all();
  }

 private:
  struct Item {
    std::chrono::steady_clock::time_point at;
    uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Item& o) const {
      return at != o.at ? at > o.at : seq > o.seq;
    }
  };
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      if (stop_) return;
      if (queue_.empty()) {
        cv_.wait(lock);
        continue;
      }
      if (std::chrono::steady_clock::now() < queue_.top().at) {
        cv_.wait_until(lock, queue_.top().at);
        continue;
      }
      std::function<void()> fn = queue_.top().fn;
      queue_.pop();
      lock.unlock();
      fn();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue_;
  uint64_t seq_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_DELAY_SCHEDULER_H_
