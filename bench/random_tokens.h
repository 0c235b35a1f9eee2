// Token ids drawn uniformly from [0, vocab) by a seeded mt19937: the
// prompts of the benchmarks that read random text.
#ifndef TWICE_BENCH_RANDOM_TOKENS_H_
#define TWICE_BENCH_RANDOM_TOKENS_H_

#include <cstdint>
#include <random>
#include <vector>

namespace twice::bench {

inline std::vector<int32_t> RandomTokenIds(int64_t n, int32_t vocab,
                                           uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t& t : out) t = id(rng);
  return out;
}

}  // namespace twice::bench

#endif  // TWICE_BENCH_RANDOM_TOKENS_H_
