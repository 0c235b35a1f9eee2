// Time of one kernels::SampleRows call over a decode batch's logits, the
// work the decode loop adds to every step: greedy, temperature 0.8, and
// temperature 0.8 with top-k 50 and top-p 0.95, for batches of 1 to 64
// rows of GPT-2's vocabulary (50257 ids in rows of 50304).
//
//   sampling_bench [threads=2]
//
// Logits are random normal (sd 3); the time is the best of repeated calls
// for at least 0.2 s per cell.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "kernels/sampling.h"
#include "kernels/threading.h"

namespace {

using twice::kernels::SamplingRule;

constexpr int64_t kVocab = 50257;
constexpr int64_t kRowStride = 50304;

double BestMsPerCall(const std::vector<float>& logits, int64_t rows,
                     const SamplingRule& rule) {
  std::vector<SamplingRule> rules(static_cast<size_t>(rows), rule);
  for (int64_t r = 0; r < rows; ++r) rules[r].seed = static_cast<uint64_t>(r);
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  double best = 1e30, total = 0;
  for (int i = 0; i < 3 || (total < 0.2 && i < 10000); ++i) {
    rules[0].draw = static_cast<uint64_t>(i);
    const auto t0 = std::chrono::steady_clock::now();
    const absl::Status s = twice::kernels::SampleRows(
        logits, rows, kRowStride, kVocab, rules, absl::MakeSpan(ids));
    const double dt =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (!s.ok()) {
      std::fprintf(stderr, "SampleRows: %s\n",
                   std::string(s.message()).c_str());
      std::exit(1);
    }
    best = std::min(best, dt);
    total += dt;
  }
  return best * 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  if (threads < 1 || !twice::kernels::SetCpuThreads(threads).ok()) {
    std::fprintf(stderr, "usage: sampling_bench [threads]\n");
    return 2;
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(64 * kRowStride));
  for (float& x : logits) x = normal(rng);
  SamplingRule greedy, temperature, limited;
  temperature.temperature = 0.8f;
  limited = temperature;
  limited.top_k = 50;
  limited.top_p = 0.95f;
  std::printf(
      "| rows | greedy ms | T 0.8 ms | T 0.8, top-k 50, top-p 0.95 ms |"
      "  (%d threads, vocabulary %lld)\n",
      threads, static_cast<long long>(kVocab));
  std::printf("| --- | --- | --- | --- |\n");
  for (const int64_t rows : {1, 4, 16, 64}) {
    std::printf("| %lld | %.2f | %.2f | %.2f |\n", static_cast<long long>(rows),
                BestMsPerCall(logits, rows, greedy),
                BestMsPerCall(logits, rows, temperature),
                BestMsPerCall(logits, rows, limited));
  }
  return 0;
}
