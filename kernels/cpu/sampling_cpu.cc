// SampleRows on the CPU (equations in kernels/sampling.h). The weights are
// kept in double so that top-p's running mass and the final draw see the
// same numbers a float64 reference would; sorting is done only when top-k
// or top-p need an order.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/sampling_uniform.h"

namespace twice::kernels::cpu {
namespace {

float Sanitize(float logit) {
  return std::isnan(logit) ? -std::numeric_limits<float>::infinity() : logit;
}

struct Candidate {
  int32_t id;
  double weight;
};

// Most likely first: larger weight, then lower id.
bool MoreLikely(const Candidate& a, const Candidate& b) {
  return a.weight != b.weight ? a.weight > b.weight : a.id < b.id;
}

}  // namespace

int32_t SampleRow(const float* logits, int64_t vocab,
                  const SamplingRule& rule) {
  int32_t argmax = 0;
  float max_logit = Sanitize(logits[0]);
  for (int64_t i = 1; i < vocab; ++i) {
    const float logit = Sanitize(logits[i]);
    if (logit > max_logit) {
      argmax = static_cast<int32_t>(i);
      max_logit = logit;
    }
  }
  if (rule.temperature == 0.0f || !std::isfinite(max_logit)) {
    // Greedy; also when every logit is -inf (nothing to weigh) or one is
    // +inf (it takes all the mass).
    return argmax;
  }

  const double max = max_logit;
  const double inv_t = 1.0 / static_cast<double>(rule.temperature);
  std::vector<Candidate> candidates;
  candidates.reserve(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) {
    const double w =
        std::exp((static_cast<double>(Sanitize(logits[i])) - max) * inv_t);
    if (w > 0.0) candidates.push_back({static_cast<int32_t>(i), w});
  }

  bool reordered = false;
  if (rule.top_k > 0 && static_cast<size_t>(rule.top_k) < candidates.size()) {
    const auto kth = candidates.begin() + (rule.top_k - 1);
    std::nth_element(candidates.begin(), kth, candidates.end(), MoreLikely);
    candidates.resize(static_cast<size_t>(rule.top_k));
    reordered = true;
  }
  if (rule.top_p < 1.0f) {
    std::sort(candidates.begin(), candidates.end(), MoreLikely);
    reordered = true;
    double total = 0.0;
    for (const Candidate& c : candidates) total += c.weight;
    const double target = static_cast<double>(rule.top_p) * total;
    double mass = 0.0;
    size_t keep = 0;
    while (keep < candidates.size()) {
      mass += candidates[keep++].weight;
      if (mass >= target) break;
    }
    candidates.resize(keep);
  }
  if (reordered) {
    std::sort(
        candidates.begin(), candidates.end(),
        [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  }

  double total = 0.0;
  for (const Candidate& c : candidates) total += c.weight;
  const double target = SamplingUniform(rule.seed, rule.draw) * total;
  double cumulative = 0.0;
  for (const Candidate& c : candidates) {
    cumulative += c.weight;
    if (target < cumulative) return c.id;
  }
  // Rounding can leave the target at the very top of the range.
  return candidates.back().id;
}

}  // namespace twice::kernels::cpu
